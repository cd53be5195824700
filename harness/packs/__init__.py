"""Assignment packs: an assignment declared as data (api.py), found through the `mtxdiag.packs` entry point
group (discover.py). docs/packs.md explains writing one."""
