"""mcp-sandboxd: give matplotlib its baked font cache under a read-only root.

Imported at interpreter start-up by mcp_sandboxd_mplcache.pth. matplotlib only
accepts a config/cache directory it can write (os.access W_OK, which is false
on a read-only root filesystem); otherwise it warns, makes a temporary
directory and rebuilds its font list (~0.13 s of CPU on every run).
MPLCONFIGDIR therefore points into the /tmp tmpfs; when that directory does
not exist yet, create it and symlink the files baked at image build time into
it. Costs one stat() when the directory already exists; never raises.
"""


def _seed(baked="/usr/local/share/mcp-sandboxd/matplotlib"):
    import os

    target = os.environ.get("MPLCONFIGDIR")
    if not target or os.path.isdir(target):
        return
    try:
        names = os.listdir(baked)
        os.makedirs(target, mode=0o700)
        for name in names:
            os.symlink(os.path.join(baked, name), os.path.join(target, name))
    except OSError:
        pass


_seed()
del _seed
