"""Python source that a test's child process runs first: it collects the name of every Numba compilation.

Numba reports each compilation as a ``numba:compile`` event (a load from its on-disk cache is not one), so a
child that starts with :data:`LISTEN` has, in ``names``, what it compiled.
"""

LISTEN = """
from numba.core import event
names = []
class _Count(event.Listener):
    def on_start(self, ev):
        names.append(ev.data["dispatcher"].py_func.__qualname__)
    def on_end(self, ev):
        pass
event.register("numba:compile", _Count())
"""
