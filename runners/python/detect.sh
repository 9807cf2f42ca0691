# shellcheck shell=sh
# Run by build.sh inside the built image (sh -s, no network, read-only root):
# prints version=, libraries= and description= for the image labels.
exec python3 - <<'PY'
import importlib, importlib.metadata as md, platform

# (distribution, import name) of every preinstalled library
libs = [("numpy", "numpy"), ("pandas", "pandas"), ("matplotlib", "matplotlib.pyplot"),
        ("scipy", "scipy"), ("requests", "requests"), ("psycopg2", "psycopg2"),
        ("openpyxl", "openpyxl"), ("sympy", "sympy")]
pairs = []
for dist, mod in libs:
    importlib.import_module(mod)          # fails the build if it does not import
    pairs.append(f"{dist} {md.version(dist)}")
v = platform.python_version()
short = ".".join(v.split(".")[:2])
print(f"version={v}")
print("libraries=" + ",".join(pairs))
print(f"description=Python {short} with numpy, pandas, matplotlib (Agg), scipy, requests, "
      "psycopg2, openpyxl, sympy. Save files to /data to return them.")
PY
