# build.sh smoke test: run as /sandbox/main.py through sandbox.command.
import os

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import psycopg2  # noqa: F401
import requests  # noqa: F401
import scipy.stats
import seaborn  # noqa: F401
import sklearn.linear_model
import statsmodels.api  # noqa: F401

assert matplotlib.get_backend().lower() == "agg", matplotlib.get_backend()
df = pd.DataFrame({"x": np.arange(10), "y": np.arange(10) ** 2})
df.plot(x="x", y="y")
plt.savefig("/data/smoke.png")
df.to_csv("/data/smoke.csv", index=False)
with open("/data/smoke.png", "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
assert abs(scipy.stats.norm.cdf(0) - 0.5) < 1e-12
model = sklearn.linear_model.LinearRegression().fit(df[["x"]], df["y"])
assert model.coef_[0] > 0
print("uid", os.getuid(), "cwd", os.getcwd())
print("smoke ok")
