# shellcheck shell=sh
# Run by build.sh inside the built image (sh -s, no network, read-only root):
# prints version=, libraries= and description= for the image labels.
exec Rscript --vanilla - <<'RS'
# Every preinstalled library; loading each fails the build if one is broken.
libs <- c("ggplot2", "dplyr", "tidyr", "readr", "purrr", "tibble", "stringr",
          "forcats", "lubridate", "data.table", "jsonlite", "readxl", "writexl",
          "zoo", "broom", "scales", "glue", "magrittr", "DBI", "RSQLite",
          "MASS", "lattice", "Matrix", "mgcv", "nlme", "survival", "rpart")
pairs <- vapply(libs, function(p) {
  suppressPackageStartupMessages(library(p, character.only = TRUE))
  paste(p, as.character(packageVersion(p)))
}, "")
v <- paste(R.version$major, R.version$minor, sep = ".")
short <- sub("^([0-9]+[.][0-9]+).*", "\\1", v)
cat("version=", v, "\n", sep = "")
cat("libraries=", paste(pairs, collapse = ","), "\n", sep = "")
# run_code's description shows the text up to the first "; ".
cat("description=R ", short, " with ggplot2, dplyr, tidyr, readr, data.table, ",
    "jsonlite, stringr, lubridate, purrr; also tibble, forcats, readxl, writexl, ",
    "zoo, broom, scales, DBI with RSQLite and the recommended packages (MASS, ",
    "lattice, Matrix, mgcv, nlme, survival, rpart); plots are captured as PNG. ",
    "Save files to /data to return them.\n", sep = "")
RS
