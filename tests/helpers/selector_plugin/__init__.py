"""A user dir that is the plugin plus the docs' example selector (``window``, README "Adding a
selector"): ``--user-dir tests/helpers/selector_plugin`` in the tests that run every registered
selector through fairseq's commands, so that a selector added from one file passes them."""

import ssan_plugin  # noqa: F401  (the plugin's models, tasks and criteria)

from . import window  # noqa: F401  (registers the window selector)
