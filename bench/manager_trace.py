"""The running manager's memory by file and line: `python -m bench.manager_trace [NODES]`.

Both simulators (NODES uninitialized Nodes, default 5,000; 20 ms per cloud call), the tree
as `pyccm demo` runs it, with PYTHONTRACEMALLOC=1 (one frame) in every process of the tree.
Once every node's initialization PATCH is in the kube simulator's log (and 5 s more), gdb
attaches to the manager and runs a snippet under the GIL that writes tracemalloc's
statistics by file and by line to trace.txt in the run's directory; the script prints it.
Needs gdb and ptrace on the manager (same user). A diagnostic, not a measurement of PSS:
tracemalloc's own overhead doubles the manager's memory while it runs.
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.large_cluster import tree_processes
from bench.node_init import admin
from bench.tree_memory import memory_of
from pyccm_sim.demo import demo_kube_qps, process_tree, simulators

NODES = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
work = Path(tempfile.mkdtemp(prefix="ns-trace-"))
out = work / "trace.txt"
code = (
    "import tracemalloc, gc; gc.collect(); s = tracemalloc.take_snapshot(); N = chr(10); "
    f"f = open('{out}', 'w'); t = s.statistics('filename'); "
    "f.write('total %d KiB' % (sum(x.size for x in t) // 1024) + N); "
    "r = lambda x: '%8d KiB %8d  ' % (x.size // 1024, x.count); "
    "[f.write(r(x) + x.traceback[0].filename + N) for x in t[:40]]; "
    "f.write(N); "
    "[f.write(r(x) + str(x.traceback[0]) + N) for x in s.statistics('lineno')[:45]]; "
    "f.close()"
)
with simulators(work, nodes=NODES, latency=20.0) as world:
    os.environ["PYTHONTRACEMALLOC"] = "1"
    mark = int(admin(world, "state")["requests"])
    with process_tree(world, node_syncs=20, kube_api_qps=demo_kube_qps(NODES)):
        start = time.monotonic()
        n = 0
        while n < NODES and time.monotonic() - start < 300:
            for r in admin(world, f"requests?since={mark}"):
                mark = max(mark, r["seq"] + 1)
                if (
                    r.get("verb") == "patch"
                    and r.get("resource") == "nodes"
                    and not r.get("subresource")
                ):
                    n += 1
            time.sleep(0.5)
        time.sleep(5)
        pid = tree_processes(world)["manager"]
        size = memory_of(pid)
        pss = "?" if size is None else f"{size.pss / 1024:.1f}"
        print(f"{n} initialized at {time.monotonic() - start:.1f} s; manager PSS {pss} MiB")
        gdb = [
            *("gdb", "-p", str(pid), "-batch", "-ex", "call (int)PyGILState_Ensure()"),
            *("-ex", f'call (int)PyRun_SimpleString("{code}")'),
            *("-ex", "call (void)PyGILState_Release($1)"),
        ]
        r = subprocess.run(gdb, check=False, capture_output=True, text=True, timeout=120)
        print(r.stdout[-400:], r.stderr[-400:])
        print(out.read_text() if out.exists() else "no trace")
