"""Convert PipeDream per-layer profiles (``graph.txt``) into raytestbed profiles.

Reads ``<src>/{image_classification,translation}/<model>/graph.txt`` (copied from
msr-fiddle/pipedream@7db6a1c, see ``<src>/SOURCE.md``) and writes
``<out>/<model>.json`` in the format of :mod:`raytestbed.core.profile`.

Conversion:

* node lines ``nodeK -- <module repr> -- forward_compute_time=<ms>,
  backward_compute_time=<ms>, activation_size=<bytes>, parameter_size=<bytes>``;
  a list ``activation_size=[a; b; c]`` (a module with several outputs, e.g. an
  LSTM's output and (h, c)) counts as the sum ``a + b + c``;
* edge lines ``\\tnodeA -- nodeB``;
* the DAG is linearised by Kahn's algorithm, ties broken by numeric node id;
  ms -> s; ``out_bytes`` of the layer at position p is the exact cut size for that
  order (:func:`raytestbed.core.profile.linearize_dag`), 0 for the last layer;
* nothing is dropped: PipeDream's ``Input`` nodes (whose forward time is data
  loading / host-to-device copy, not compute) are kept as layer 0 and the
  ``source`` text says so and how large they are;
* the batch size is inferred from the activation sizes (fp32): for image models
  from the input node (``3*H*W*4*B``, H=W=224, 299 for inception_v3) cross-checked
  with the 1000-class classifier output (``1000*4*B``); for GNMT from the LSTM
  hidden state (``1024*4*B``).

Usage::

    .venv/bin/python scripts/import_pipedream_profiles.py \\
        --src "$RAYTESTBED_DATA_DIR/pipedream-profiles" --out workloads/profiles

It prints per-model totals next to the table in SOURCE.md (params there are MiB,
2**20 bytes) and exits with status 1 if a required model is missing or a total
is more than 0.5% off.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from raytestbed.core.profile import LayerProfile, ModelProfile, linearize_dag
from raytestbed.errors import ConfigError

COMMIT = "msr-fiddle/pipedream@7db6a1c"
REQUIRED = ("vgg16", "resnet50", "inception_v3", "alexnet", "gnmt")
MIB = 2.0**20  #: SOURCE.md's "params MB" column is MiB (vgg16: 553.4e6 B = 527.8 MiB)

#: SOURCE.md "Checked here" table: model -> (nodes, edges, fwd ms, bwd ms, params MiB)
SOURCE_TABLE: dict[str, tuple[int, int, float, float, float]] = {
    "alexnet": (23, 23, 680.7, 40.5, 233.1),
    "vgg16": (41, 41, 251.9, 438.6, 527.8),
    "resnet18": (71, 79, 581.1, 152.3, 44.6),
    "resnet50": (177, 193, 201.5, 260.9, 97.5),
    "resnet101": (347, 380, 207.7, 213.8, 169.9),
    "resnext50": (177, 193, 239.0, 369.0, 95.5),
    "resnext101": (347, 380, 249.6, 318.3, 168.5),
    "densenet121": (429, 487, 186.5, 148.8, 30.4),
    "inception_v3": (326, 362, 311.0, 399.8, 103.6),
    "nasnetamobile": (921, 1078, 338.5, 261.4, 32.8),
    "nasnetalarge": (1251, 1468, 416.1, 249.2, 351.9),
    "squeezenet1_0": (68, 76, 587.9, 172.1, 4.8),
    "gnmt": (48, 58, 33.5, 55.9, 739.2),
    "gnmt_large": (96, 122, 182.6, 337.9, 1059.4),
}

_NODE_RE = re.compile(
    r"^(?P<id>node\d+) -- (?P<desc>.*) -- forward_compute_time=(?P<fwd>[^,]+), "
    r"backward_compute_time=(?P<bwd>[^,]+), activation_size=(?P<act>.+), "
    r"parameter_size=(?P<par>\S+)\s*$"
)
_EDGE_RE = re.compile(r"^\t(?P<a>node\d+) -- (?P<b>node\d+)\s*$")


@dataclass(frozen=True)
class GraphNode:
    """One PipeDream node, sizes in bytes and times in milliseconds as in the file."""

    node_id: str
    desc: str
    fwd_ms: float
    bwd_ms: float
    act_bytes: tuple[float, ...]
    param_bytes: float

    @property
    def num(self) -> int:
        """Numeric part of the node id (``node12`` -> 12)."""
        return int(self.node_id[4:])


def _num(text: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{where}: not a number: {text!r}") from None


def parse_graph(text: str, where: str = "graph.txt") -> tuple[list[GraphNode], list[tuple[str, str]]]:
    """Parse a PipeDream ``graph.txt``; returns nodes sorted by numeric id and edges in file order.

    Raises:
        ConfigError: on an unparseable line or a node defined twice.
    """
    nodes: dict[str, GraphNode] = {}
    edges: list[tuple[str, str]] = []
    for ln, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        w = f"{where}:{ln}"
        m = _EDGE_RE.match(line)
        if m:
            edges.append((m["a"], m["b"]))
            continue
        m = _NODE_RE.match(line)
        if not m:
            raise ConfigError(f"{w}: unrecognised line {line[:80]!r}")
        act_txt = m["act"].strip()
        if act_txt.startswith("[") and act_txt.endswith("]"):
            acts = tuple(_num(x.strip(), w) for x in act_txt[1:-1].split(";") if x.strip())
        else:
            acts = (_num(act_txt, w),)
        node = GraphNode(
            node_id=m["id"],
            desc=" ".join(m["desc"].split()),  # collapse the multi-space reprs of GNMT modules
            fwd_ms=_num(m["fwd"], w),
            bwd_ms=_num(m["bwd"], w),
            act_bytes=acts,
            param_bytes=_num(m["par"], w),
        )
        if node.node_id in nodes:
            raise ConfigError(f"{w}: node {node.node_id} defined twice")
        nodes[node.node_id] = node
    return sorted(nodes.values(), key=lambda n: n.num), edges


def to_layers(nodes: list[GraphNode], edges: list[tuple[str, str]]) -> tuple[LayerProfile, ...]:
    """Linearise the graph (ties by numeric id) into layers with exact cut sizes, seconds, bytes."""
    raw = [
        LayerProfile(
            name=f"{n.node_id} {n.desc}",
            fwd_s=round(n.fwd_ms * 1e-3, 12),
            bwd_s=round(n.bwd_ms * 1e-3, 12),
            out_bytes=sum(n.act_bytes),  # the node's own output here; cut sizes below
            param_bytes=n.param_bytes,
        )
        for n in nodes
    ]
    by_id = {n.node_id: f"{n.node_id} {n.desc}" for n in nodes}
    for a, b in edges:
        for x in (a, b):
            if x not in by_id:
                raise ConfigError(f"graph: edge {a} -- {b} names undefined node {x}")
    return linearize_dag(raw, [(by_id[a], by_id[b]) for a, b in edges])


def _exact_div(num: float, den: float) -> int | None:
    q = num / den
    return int(round(q)) if q > 0 and abs(q - round(q)) < 1e-9 else None


def infer_batch(model: str, nodes: list[GraphNode]) -> tuple[int, str]:
    """Infer the mini-batch size from fp32 activation sizes; returns (batch, how)."""
    if model.startswith("gnmt"):
        # LSTM(…, 1024) nodes output [out; h; c] with h = c = (1, B, 1024) fp32
        hs = {n.act_bytes[1] for n in nodes if n.desc.startswith("LSTM(") and len(n.act_bytes) >= 3}
        if len(hs) == 1:
            h = hs.pop()
            b = _exact_div(h, 1024 * 4)
            emb = next((n for n in nodes if n.desc.startswith("Embedding(")), None)
            seq = _exact_div(emb.act_bytes[0], 1024 * 4 * b) if emb and b else None
            if b:
                return b, (
                    f"batch {b} inferred from the LSTM hidden state h = {h:.0f} B = 1024 x 4 B x {b}"
                    + (f"; source sequence length {seq} from the encoder embedding output "
                       f"{emb.act_bytes[0]:.0f} B = {b} x {seq} x 1024 x 4 B" if emb and seq else "")
                )
        raise ConfigError(f"{model}: cannot infer batch size")
    inp = nodes[0] if nodes and nodes[0].desc == "Input" else None
    hw = 299 if model == "inception_v3" else 224
    b_in = _exact_div(inp.act_bytes[0], 3 * hw * hw * 4) if inp else None
    fcs = {n.act_bytes[0] for n in nodes if re.match(r"Linear\(.*out_features=1000\b", n.desc)}
    b_fc = _exact_div(fcs.pop(), 1000 * 4) if len(fcs) == 1 else None
    if b_in and b_fc and b_in != b_fc:
        raise ConfigError(f"{model}: input implies batch {b_in}, classifier output implies {b_fc}")
    b = b_in or b_fc
    if not b:
        raise ConfigError(f"{model}: cannot infer batch size")
    how = [f"input node {inp.act_bytes[0]:.0f} B = {b} x 3x{hw}x{hw} x 4 B"] if b_in and inp else []
    if b_fc:
        how.append(f"1000-class classifier output = {b} x 1000 x 4 B")
    return b, f"batch {b} inferred from fp32 activation sizes ({'; '.join(how)})"


def convert(model: str, graph_file: Path) -> ModelProfile:
    """Convert one ``graph.txt`` into a :class:`ModelProfile`."""
    nodes, edges = parse_graph(graph_file.read_text(encoding="utf-8"), where=str(graph_file))
    layers = to_layers(nodes, edges)
    batch, how = infer_batch(model, nodes)
    notes = [
        f"pipedream graph.txt ({COMMIT}, profiler/{graph_file.parent.parent.name}/profiles/{model}; "
        f"GPU not stated)",
        how,
        "DAG linearised by Kahn's algorithm (ties by node id); out_bytes = exact cut size for that order; "
        "multi-output activation_size lists summed",
    ]
    inputs = [n for n in nodes if n.desc.startswith("Input")]
    if inputs:
        in_ms = sum(n.fwd_ms for n in inputs)
        notes.append(
            f"{len(inputs)} input node(s) kept as layers ({', '.join(n.node_id for n in inputs)}) "
            f"with {in_ms:.3f} ms forward time (data loading / host-to-device, not compute"
            + (", suspiciously large" if in_ms > 100 else "")
            + ")"
        )
    return ModelProfile(
        model=model, batch_size=batch, source="; ".join(notes), device="unknown GPU", layers=layers
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, required=True, help="folder holding SOURCE.md and the graph.txt trees")
    ap.add_argument("--out", type=Path, required=True, help="folder to write <model>.json into")
    args = ap.parse_args(argv)

    graphs = sorted(args.src.glob("*/*/graph.txt"), key=lambda p: p.parent.name)
    ok = True
    written: set[str] = set()
    print(f"{'model':<14} {'layers':>6} {'batch':>5} {'fwd ms':>8} {'bwd ms':>8} {'params MiB':>10}"
          f"  {'SOURCE.md fwd/bwd/MiB':>24}  check")
    for g in graphs:
        model = g.parent.name
        try:
            prof = convert(model, g)
        except ConfigError as e:
            print(f"{model:<14} SKIPPED: {e}", file=sys.stderr)
            ok = ok and model not in REQUIRED
            continue
        fwd, bwd, mib = prof.total_fwd_s * 1e3, prof.total_bwd_s * 1e3, prof.total_param_bytes / MIB
        ref = SOURCE_TABLE.get(model)
        if ref:
            good = prof.num_layers == ref[0] and all(
                abs(x - r) <= max(0.005 * r, 0.051) for x, r in zip((fwd, bwd, mib), ref[2:])
            )
            refs = f"{ref[2]:.1f}/{ref[3]:.1f}/{ref[4]:.1f}"
        else:
            good, refs = True, "-"
        ok = ok and good
        prof.save(args.out / f"{model}.json")
        written.add(model)
        print(f"{model:<14} {prof.num_layers:>6} {prof.batch_size:>5} {fwd:>8.1f} {bwd:>8.1f} {mib:>10.1f}"
              f"  {refs:>24}  {'ok' if good else 'MISMATCH'}")
    missing = [m for m in REQUIRED if m not in written]
    if missing:
        print(f"missing required models: {', '.join(missing)}", file=sys.stderr)
        ok = False
    return 0 if ok else 1

