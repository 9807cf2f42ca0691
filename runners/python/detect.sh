# shellcheck shell=sh
# Run by build.sh inside the built image (sh -s, no network, read-only root):
# prints version=, libraries= and description= for the image labels.
exec python3 - <<'PY'
import importlib, importlib.metadata as md, platform

# (distribution, import name) of every preinstalled library
libs = [("numpy", "numpy"), ("pandas", "pandas"), ("matplotlib", "matplotlib.pyplot"),
        ("seaborn", "seaborn"), ("plotly", "plotly.express"), ("scipy", "scipy.stats"),
        ("scikit-learn", "sklearn.linear_model"), ("statsmodels", "statsmodels.api"),
        ("sympy", "sympy"), ("networkx", "networkx"), ("numexpr", "numexpr"),
        ("bottleneck", "bottleneck"), ("openpyxl", "openpyxl"), ("xlsxwriter", "xlsxwriter"),
        ("xlrd", "xlrd"), ("psycopg2", "psycopg2"), ("sqlalchemy", "sqlalchemy"),
        ("requests", "requests"), ("beautifulsoup4", "bs4"), ("lxml", "lxml.etree"),
        ("tabulate", "tabulate"), ("dill", "dill")]
pairs = []
for dist, mod in libs:
    importlib.import_module(mod)          # fails the build if it does not import
    pairs.append(f"{dist} {md.version(dist)}")
v = platform.python_version()
short = ".".join(v.split(".")[:2])
print(f"version={v}")
print("libraries=" + ",".join(pairs))
print(f"description=Python {short} with numpy, pandas, matplotlib (Agg), seaborn, plotly, "
      "scipy, scikit-learn, statsmodels, sympy, networkx, openpyxl, xlsxwriter, psycopg2, "
      "SQLAlchemy, requests, beautifulsoup4. No pyarrow/polars. Save files to /data to return them.")
PY
