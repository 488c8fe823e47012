"""A clean exit for fairseq's CLIs: stop the data-prefetch threads before the interpreter ends.

fairseq's epoch iterators prefetch batches in a daemon thread (``BufferedIterator`` ->
``BackgroundConsumer``, ``--data-buffer-size``, default 10). When training stops inside an epoch
(``--max-update``, the usual case), that thread is still collating the next batches while the
process exits. Python ends daemon threads by making them exit as soon as they try to take the
interpreter lock again; a thread that is inside a torch operator at that moment is unwound
through C++ frames that may not throw, and the C++ runtime aborts the process:
``terminate called without an active exception``, exit status -6 (SIGABRT), after fairseq-train
has already logged "done training" and written every checkpoint. Whether it happens depends on
where the thread is at the last instant, so it is intermittent.

``stop_background_consumers`` runs at exit (``atexit`` callbacks run after non-daemon threads
are joined but before daemon threads are torn down): every live ``BackgroundConsumer`` is told
to stop after the item it is producing, its queue is drained so that no ``put`` blocks, and it is
joined. Registered by ``ssan_plugin.register()`` (which runs when fairseq is imported, as
under ``--user-dir``, or when a command or the hub calls it).
"""

import atexit
import queue
import threading
import time

from fairseq.data.iterators import BackgroundConsumer


def stop_background_consumers(timeout: float = 10.0) -> int:
    """Stop and join every live fairseq ``BackgroundConsumer``; return how many were stopped.

    A consumer blocked in its source for longer than ``timeout`` seconds (in total, over all
    consumers) is left running; nothing is raised at exit.
    """
    deadline = time.monotonic() + timeout
    stopped = 0
    for thread in threading.enumerate():
        if not isinstance(thread, BackgroundConsumer) or not thread.is_alive():
            continue
        # BackgroundConsumer.run: after each put, `if count >= _max_len: break`, then it puts
        # its sentinel. 0 makes the item in progress the last one.
        thread._max_len = 0
        while thread.is_alive() and time.monotonic() < deadline:
            try:
                thread._queue.get_nowait()  # room for the pending put (an item or the sentinel)
            except queue.Empty:
                pass
            thread.join(0.01)
        stopped += not thread.is_alive()
    return stopped


def register():
    """Run ``stop_background_consumers`` at interpreter exit (idempotent)."""
    atexit.unregister(stop_background_consumers)
    atexit.register(stop_background_consumers)
