"""What is under a folder, to show a refused command touched nothing."""

import hashlib
import os


def snapshot(root):
    """{relative path: sha256 of the bytes, or 'dir'} of everything under root."""
    found = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(folder, name), root)] = "dir"
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return found
