"""The drawn state machines of a workunit and of a result (reference/server.md §1–§3).

BOINC keeps no single "state" for either: a result has server_state, outcome and validate_state,
a workunit need_validate, error_mask, assimilate_state and file_delete_state (§1.5). Each machine
here folds those fields into one node, so the page can highlight where a row is now and, by
replaying its lifecycle events, mark the transitions it took to get there.
"""

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby

from backend.models import (
    AssimilateState,
    FileDeleteState,
    LifecycleEvent,
    Outcome,
    Result,
    ServerState,
    ValidateState,
    Workunit,
)


@dataclass(frozen=True)
class Machine:
    name: str
    nodes: dict[str, tuple[int, int, str]]  # node -> (column, row, label)
    edges: tuple[tuple[str, str], ...]  # (from, to) pairs, each one transition BOINC's daemons can make
    fields: dict[str, int]  # the row's fields the nodes are folded from -> their value at creation

    def node(self, state: Mapping[str, int]) -> str | None:
        return NODE_FUNCTIONS[self.name](state)


def result_node(state: Mapping[str, int]) -> str | None:
    """The node of a result; None for the moment between OVER and its outcome being set."""
    server_state = state["server_state"]
    if server_state != ServerState.OVER:
        return ServerState(server_state).name if server_state in ServerState.values else None
    outcome = state["outcome"]
    if outcome == Outcome.INIT:
        return None
    if outcome == Outcome.SUCCESS:
        validate_state = state["validate_state"]
        if validate_state == ValidateState.INIT:
            return "SUCCESS"
        return ValidateState(validate_state).name
    return Outcome(outcome).name


def workunit_node(state: Mapping[str, int]) -> str:
    file_delete_state = state["file_delete_state"]
    if file_delete_state == FileDeleteState.DONE:
        return "FILES_DELETED"
    if file_delete_state == FileDeleteState.ERROR:
        return "DELETE_ERROR"
    if file_delete_state == FileDeleteState.READY:
        return "DELETE_READY"
    if state["assimilate_state"] == AssimilateState.DONE:
        return "ASSIMILATED"
    if state["assimilate_state"] == AssimilateState.READY:
        return "ASSIMILATE_READY"
    if state["error_mask"]:
        return "ERROR"
    if state["need_validate"]:
        return "NEED_VALIDATE"
    return "ACTIVE"


NODE_FUNCTIONS: dict[str, Callable[[Mapping[str, int]], str | None]] = {
    "result": result_node,
    "workunit": workunit_node,
}

RESULT_MACHINE = Machine(
    name="result",
    nodes={
        "INACTIVE": (0, 0, "inactive"),
        "UNSENT": (1, 0, "unsent"),
        "DIDNT_NEED": (1, 2, "didn't need"),
        "IN_PROGRESS": (2, 0, "in progress"),
        "COULDNT_SEND": (2, 2, "couldn't send"),
        "SUCCESS": (3, 0, "success"),
        "NO_REPLY": (3, 1, "no reply"),
        "CLIENT_ERROR": (3, 2, "client error"),
        "CLIENT_DETACHED": (3, 3, "client detached"),
        "VALID": (4, 0, "valid"),
        "INCONCLUSIVE": (4, 1, "inconclusive"),
        "INVALID": (5, 1, "invalid"),
        "VALIDATE_ERROR": (4, 3, "validate error"),
        "NO_CHECK": (5, 0, "no check"),
        "TOO_LATE": (4, 2, "too late"),
    },
    edges=(
        ("INACTIVE", "UNSENT"),
        ("INACTIVE", "DIDNT_NEED"),
        ("UNSENT", "IN_PROGRESS"),
        ("UNSENT", "DIDNT_NEED"),
        ("UNSENT", "COULDNT_SEND"),
        ("IN_PROGRESS", "SUCCESS"),
        ("IN_PROGRESS", "CLIENT_ERROR"),
        ("IN_PROGRESS", "NO_REPLY"),
        ("IN_PROGRESS", "CLIENT_DETACHED"),
        ("NO_REPLY", "SUCCESS"),
        ("NO_REPLY", "CLIENT_ERROR"),
        ("SUCCESS", "VALID"),
        ("SUCCESS", "INCONCLUSIVE"),
        ("SUCCESS", "INVALID"),
        ("SUCCESS", "VALIDATE_ERROR"),
        ("SUCCESS", "NO_CHECK"),
        ("SUCCESS", "TOO_LATE"),
        ("INCONCLUSIVE", "VALID"),
        ("INCONCLUSIVE", "INVALID"),
        ("INCONCLUSIVE", "NO_CHECK"),
    ),
    fields={"server_state": ServerState.UNSENT, "outcome": Outcome.INIT, "validate_state": ValidateState.INIT},
)

WORKUNIT_MACHINE = Machine(
    name="workunit",
    nodes={
        "ACTIVE": (0, 0, "sending / in progress"),
        "NEED_VALIDATE": (1, 0, "need validate"),
        "ERROR": (1, 1, "error"),
        "ASSIMILATE_READY": (2, 0, "assimilate ready"),
        "ASSIMILATED": (3, 0, "assimilated"),
        "DELETE_READY": (4, 0, "files: delete ready"),
        "FILES_DELETED": (5, 0, "files deleted"),
        "DELETE_ERROR": (5, 1, "file delete error"),
    },
    edges=(
        ("ACTIVE", "NEED_VALIDATE"),
        ("NEED_VALIDATE", "ACTIVE"),
        ("NEED_VALIDATE", "ASSIMILATE_READY"),
        ("ACTIVE", "ASSIMILATE_READY"),
        ("ACTIVE", "ERROR"),
        ("NEED_VALIDATE", "ERROR"),
        ("ERROR", "ASSIMILATE_READY"),
        ("ASSIMILATE_READY", "ASSIMILATED"),
        ("ASSIMILATED", "DELETE_READY"),
        ("DELETE_READY", "FILES_DELETED"),
        ("DELETE_READY", "DELETE_ERROR"),
        ("DELETE_ERROR", "FILES_DELETED"),
    ),
    fields={
        "need_validate": 0,
        "error_mask": 0,
        "assimilate_state": AssimilateState.INIT,
        "file_delete_state": FileDeleteState.INIT,
    },
)


def current_state(machine: Machine, row: Workunit | Result) -> dict[str, int]:
    """The machine's fields read off a model instance."""
    return {name: int(getattr(row, name)) for name in machine.fields}


def path_taken(machine: Machine, events: Iterable[LifecycleEvent]) -> list[str]:
    """The nodes a row passed through, replayed from its events (in time order).

    The starting values are the creation defaults, except that a field's first event says what
    it was before (its ``old``), which covers rows created in another state (INACTIVE results).
    """
    events = [e for e in events if e.field in machine.fields]
    state = dict(machine.fields)
    seen: set[str] = set()
    for event in events:
        if event.field not in seen and event.old is not None:
            state[event.field] = event.old
            seen.add(event.field)
    path: list[str] = []
    start = machine.node(state)
    if start:
        path.append(start)
    # Changes one actor makes at one moment are one step (the validator clears need_validate
    # and sets assimilate_state READY together), so they are applied together.
    for _, step in groupby(events, key=lambda e: (e.time, e.actor)):
        for event in step:
            state[event.field] = event.new  # type: ignore[assignment]  # new is None only in host preference events
        node = machine.node(state)
        if node and (not path or node != path[-1]):
            path.append(node)
    return path


# --- drawing --------------------------------------------------------------------------------

BOX_W, BOX_H, COL_GAP, ROW_GAP, MARGIN = 118, 32, 150, 58, 10


@dataclass(frozen=True)
class Box:
    name: str
    label: str
    x: float
    y: float
    w: float
    h: float
    current: bool
    visited: bool

    @property
    def text_x(self) -> float:
        return self.x + self.w / 2

    @property
    def text_y(self) -> float:
        return self.y + self.h / 2 + 4


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    x1: float
    y1: float
    x2: float
    y2: float
    taken: bool
    expected: bool  # False for a transition the machine does not draw but the events show


@dataclass(frozen=True)
class Drawing:
    name: str
    width: float
    height: float
    boxes: list[Box]
    arrows: list[Arrow]

    @property
    def current(self) -> str:
        return next((box.name for box in self.boxes if box.current), "")

    @property
    def taken(self) -> list[tuple[str, str]]:
        return [(a.source, a.target) for a in self.arrows if a.taken]


def _centre(machine: Machine, name: str) -> tuple[float, float]:
    column, row, _ = machine.nodes[name]
    return MARGIN + column * COL_GAP + BOX_W / 2, MARGIN + row * ROW_GAP + BOX_H / 2


def _clip(dx: float, dy: float) -> float:
    """How far along (dx, dy) from a box's centre its border lies."""
    scales = []
    if dx:
        scales.append((BOX_W / 2 + 2) / abs(dx))
    if dy:
        scales.append((BOX_H / 2 + 2) / abs(dy))
    return min(scales) if scales else 0


def _arrow(machine: Machine, source: str, target: str, taken: bool, expected: bool, both_ways: bool) -> Arrow:
    (x1, y1), (x2, y2) = _centre(machine, source), _centre(machine, target)
    dx, dy = x2 - x1, y2 - y1
    if both_ways:  # two opposite transitions: draw them side by side
        length = math.hypot(dx, dy)
        shift_x, shift_y = -dy / length * 6, dx / length * 6
        x1, y1, x2, y2 = x1 + shift_x, y1 + shift_y, x2 + shift_x, y2 + shift_y
    t = _clip(dx, dy)
    return Arrow(
        source,
        target,
        round(x1 + dx * t, 1),
        round(y1 + dy * t, 1),
        round(x2 - dx * t, 1),
        round(y2 - dy * t, 1),
        taken,
        expected,
    )


def drawing(machine: Machine, current: str | None, path: Sequence[str]) -> Drawing:
    """The boxes and arrows of ``machine``: ``current`` highlighted, ``path``'s steps marked."""
    steps = set(zip(path, path[1:]))
    edges = list(machine.edges) + sorted(
        step for step in steps if step not in machine.edges and step[0] in machine.nodes and step[1] in machine.nodes
    )
    edge_set = set(edges)
    arrows = [_arrow(machine, s, t, (s, t) in steps, (s, t) in machine.edges, (t, s) in edge_set) for s, t in edges]
    visited = set(path)
    boxes = []
    for name, (column, row, label) in machine.nodes.items():
        boxes.append(
            Box(
                name,
                label,
                MARGIN + column * COL_GAP,
                MARGIN + row * ROW_GAP,
                BOX_W,
                BOX_H,
                name == current,
                name in visited,
            )
        )
    columns = max(c for c, _, _ in machine.nodes.values()) + 1
    rows = max(r for _, r, _ in machine.nodes.values()) + 1
    width = 2 * MARGIN + (columns - 1) * COL_GAP + BOX_W
    height = 2 * MARGIN + (rows - 1) * ROW_GAP + BOX_H
    return Drawing(machine.name, width, height, boxes, arrows)


def draw_row(machine: Machine, row: Workunit | Result, events: Iterable[LifecycleEvent]) -> Drawing:
    """The drawing for a model instance and its lifecycle events."""
    return drawing(machine, machine.node(current_state(machine, row)), path_taken(machine, events))
