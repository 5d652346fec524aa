"""``coevo doctor --exec_backend ray``: each sandbox node's isolation layers."""

from __future__ import annotations

from .executor import RayExecutor


def doctor_report(address: str | None = None, launcher: str = "auto", use_uid: bool = True,
                  **options) -> str:
    """Each sandbox node's isolation layers, as ``coevo doctor --exec_backend ray`` prints them."""
    ex = RayExecutor(address=address, slots=1, launcher=launcher, use_uid=use_uid,
                     allow_unsafe=True, **options)
    try:
        rep = ex.isolation
        lines = [f"ray cluster {address or '(local instance)'}: {len(rep['nodes'])} sandbox "
                 f"node(s); coevo-code {ex.version}"]
        for node in rep["nodes"]:
            lines.append(f"node {node['ip']} ({node['hostname']}, {node['node_id'][:8]}): "
                         f"launcher {node['launcher']}, python {node['python']}")
            width = max((len(k) for k in node["layers"]), default=0)
            for name, (on, detail) in node["layers"].items():
                lines.append(f"  [{'on ' if on else 'OFF'}] {name:<{width}}  {detail}")
        return "\n".join(lines)
    finally:
        ex.close()
