"""Chapter 05 views: the frames Dynamo rewrote (graphs, Python code, resume calls) and a
function's cache entries in lookup order."""
import torch
from torch._dynamo.eval_frame import _debug_get_cache_entry_list

from course_models import ch05_models as models
from graphviews import show
from graphviews.dynamo_frames import (CACHE_ENTRY, COMPILED_GRAPH, PYTHON_CODE, RECOMPILE, RESUME_CALL,
                                      cache_view, frames_view, short_name)


def test_short_name_drops_the_uuid():
    assert short_name("__compiled_fn_2_5063af86_2f05_40dc_9db4_c72b6e16e9e7") == "__compiled_fn_2"
    assert short_name("__resume_at_40_3") == "__resume_at_40_3"


def test_one_frame_per_compiled_frame_linked_through_resume_functions():
    fn = models.load_program(models.BREAK_PROGRAMS["two_breaks"])
    pairs = models.transformed_code(fn, torch.randn(4))
    view = frames_view(pairs, fn.__globals__)
    assert [c.label.split(": ")[1] for c in view.clusters] == [code.co_name for code, _ in pairs]
    kinds = [view.node(i).kind for i in view.clusters[0].node_ids]
    assert kinds == [COMPILED_GRAPH, PYTHON_CODE, RESUME_CALL]
    assert [view.node(i).kind for i in view.clusters[2].node_ids] == [COMPILED_GRAPH]
    links = [e for e in view.edges if e.label]
    assert [(e.src.split(".")[0], e.dst.split(".")[0]) for e in links] == [("f0", "f1"), ("f1", "f2")]
    assert "__compiled_fn" in show(view).text


def test_cache_entries_in_lookup_order_then_recompile():
    torch._dynamo.reset()
    compiled = torch.compile(models.scale_shift, backend="eager")
    for n in (2, 5):
        compiled(torch.ones(4), n, True)
    entries = _debug_get_cache_entry_list(models.scale_shift)
    view = cache_view(entries)
    assert [n.kind for n in view.nodes] == [CACHE_ENTRY, CACHE_ENTRY, RECOMPILE]
    assert view.nodes[0].label == f"编译 id {entries[0].compile_id}"
    assert any("L['n'] == 2" in line for line in view.nodes[1].details)
    torch._dynamo.reset()
