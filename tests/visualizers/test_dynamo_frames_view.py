"""Chapter 05 views: the frames Dynamo rewrote (graphs, Python code, resume calls) and a
function's cache entries in lookup order.

The views read bytecode, which differs between Python 3.11, 3.12 and 3.13: run these on each."""
import torch
from torch._dynamo.eval_frame import _debug_get_cache_entry_list

from course_models import ch05_models as models
from graphviews import show
from graphviews.dynamo_frames import (CACHE_ENTRY, COMPILED_GRAPH, PYTHON_CODE, RECOMPILE, RESUME_CALL,
                                      cache_view, frames_view, resume_paths, short_name)


def frame_kinds(view, index: int) -> list[str]:
    return [view.node(node_id).kind for node_id in view.clusters[index].node_ids]


def links(view) -> list[tuple[str, str]]:
    """(resume call node, first node of the frame it runs): the edges that leave a frame."""
    return [(e.src, e.dst) for e in view.edges if e.src.split(".")[0] != e.dst.split(".")[0]]


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


def test_a_call_break_continues_in_one_resume_function():
    fn = models.load_program(models.BREAK_PROGRAMS["one_print"])
    pairs = models.transformed_code(fn, torch.randn(4))
    assert [len(path) for path in resume_paths(pairs[0][1])] == [1]
    view = frames_view(pairs, fn.__globals__)
    assert frame_kinds(view, 0) == [COMPILED_GRAPH, PYTHON_CODE, RESUME_CALL]
    resume_call = view.clusters[0].node_ids[2]
    assert [(e.src, e.label) for e in view.edges if e.dst == resume_call] == [("f0.python", "")]
    assert links(view) == [(resume_call, view.clusters[1].node_ids[0])]


def test_a_value_branch_offers_two_resume_functions_and_links_the_one_taken():
    fn = models.load_program(models.BREAK_PROGRAMS["value_branch"])
    taken = set()
    for x in (torch.ones(4), -torch.ones(4)):
        pairs = models.transformed_code(fn, x)
        [[if_next], [if_jump]] = resume_paths(pairs[0][1])
        # why the view matches by code object: the two branches' resume functions share a name
        assert fn.__globals__[if_next].__code__.co_name == fn.__globals__[if_jump].__code__.co_name
        view = frames_view(pairs, fn.__globals__)
        assert frame_kinds(view, 0) == [COMPILED_GRAPH, PYTHON_CODE, RESUME_CALL, RESUME_CALL]
        resume_calls = view.clusters[0].node_ids[2:]
        # both branches leave the Python code; neither resume call follows the other
        assert sorted((e.src, e.dst, e.label) for e in view.edges if e.dst in resume_calls) == \
            sorted(("f0.python", call, "2 选 1") for call in resume_calls)
        [(linked, first_node)] = links(view)
        assert first_node == view.clusters[1].node_ids[0]
        # the resume function the run called is the one whose code frame 1 runs (both share a co_name)
        resume_code = fn.__globals__[next(name for name in (if_next, if_jump)
                                          if short_name(name) == view.node(linked).label)].__code__
        assert resume_code is pairs[1][0]
        [not_taken] = [call for call in resume_calls if call != linked]
        assert any("没有编译" in line for line in view.node(not_taken).details)
        taken.add(resume_calls.index(linked))
    assert taken == {0, 1}


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
