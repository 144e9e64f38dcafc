"""``to_view``: any graph the course shows becomes a :class:`GraphView`; each kind registers an adapter.

FX graphs are registered here; TorchScript IR in :mod:`.torchscript`, Dynamo's graphs in :mod:`.dynamo`.
"""
from __future__ import annotations

from functools import singledispatch

import torch.fx

from .fx import from_fx
from .model import GraphView


@singledispatch
def to_view(obj, **options) -> GraphView:
    """Convert ``obj`` to a :class:`GraphView`; chapters register adapters per type."""
    raise TypeError(f"no graph view for {type(obj).__name__}; "
                    "register one with @graphviews.to_view.register")


@to_view.register
def _(view: GraphView, **options) -> GraphView:
    return view


to_view.register(torch.fx.GraphModule, from_fx)
to_view.register(torch.fx.Graph, from_fx)
