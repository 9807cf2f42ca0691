# SPDX-License-Identifier: MIT
# The R installer of packages on demand (lib/run/packages_cran.h), embedded
# in the daemon and run by its sh script with Rscript --vanilla in a one-off
# box of the R image that alone has network:
#   install.R CACHE STAGE DOWNLOADS REPOS SPEC...
# CACHE is the conversation's R library (read: what is installed), STAGE the
# library this fills, DOWNLOADS where tarballs go, REPOS the CRAN-like
# repositories (comma-separated), each SPEC a name with an optional exact
# version after '@' (checked by the daemon). It reads the repositories'
# index, works out what the image and the cache lack (Depends, Imports,
# LinkingTo), downloads it (an older version from src/contrib/Archive, its
# own DESCRIPTION then describing it), refuses anything with code to compile
# before installing (no compilers in the image), and installs the rest with
# R CMD INSTALL in dependency order. A failure is one line on stderr that
# starts with "mcp-sandboxd: " and says what to do; exit status 1.
a <- commandArgs(TRUE)
cache <- a[1L]; stage <- a[2L]; dl <- a[3L]
repos <- strsplit(a[4L], ",", fixed = TRUE)[[1L]]
specs <- a[-(1:4)]
say <- function(...) cat("mcp-sandboxd: ", ..., "\n", sep = "", file = stderr())
fail <- function(...) { say(...); quit(save = "no", status = 1L) }
options(repos = repos, timeout = 60, warn = 1, useFancyQuotes = FALSE)
libs <- c(stage, if (dir.exists(cache)) cache)
.libPaths(libs)
Sys.setenv(R_LIBS = paste(.libPaths(), collapse = ":"), R_LIBS_USER = " ")
names <- sub("@.*", "", specs)
pins <- ifelse(grepl("@", specs, fixed = TRUE), sub("^[^@]*@", "", specs), "")
msgs <- character()
av <- withCallingHandlers(
  tryCatch(available.packages(repos = repos, type = "source",
                              filters = c("R_version", "OS_type", "duplicates")),
           error = function(e) { msgs <<- c(msgs, conditionMessage(e)); NULL }),
  warning = function(w) { msgs <<- c(msgs, conditionMessage(w)); invokeRestart("muffleWarning") })
if (is.null(av) || nrow(av) == 0L)
  fail("could not read the package index (src/contrib/PACKAGES) of ",
       paste(repos, collapse = ", "), ": ",
       gsub("[\r\n ]+", " ", paste(unique(c(msgs[1L], msgs[length(msgs)])), collapse = "; ")))
for (i in seq_along(names)) if (!names[i] %in% rownames(av)) {
  near <- rownames(av)[tolower(rownames(av)) == tolower(names[i])]
  fail("package '", names[i], "' is not in ", paste(repos, collapse = ", "),
       if (length(near)) paste0("; names are case-sensitive: did you mean '", near[1L], "'?")
       else "; check the name (as on CRAN, e.g. \"data.table\")")
}
fields <- c("Depends", "Imports", "LinkingTo")
get <- function(name, ver, dest) {
  if (!nzchar(ver) || identical(unname(av[name, "Version"]), ver)) {
    r <- tryCatch(download.packages(name, dest, available = av, repos = repos,
                                    type = "source", quiet = TRUE),
                  error = function(e) e, warning = function(w) w)
    if (inherits(r, "condition") || !length(r) || !file.exists(r[1L, 2L]))
      fail("could not download '", name, "' from ", unname(av[name, "Repository"]), ": ",
           if (inherits(r, "condition")) conditionMessage(r) else "no file")
    return(r[1L, 2L])
  }
  f <- file.path(dest, paste0(name, "_", ver, ".tar.gz"))
  for (u in repos) {
    url <- paste0(sub("/+$", "", u), "/src/contrib/Archive/", name, "/", basename(f))
    ok <- tryCatch(download.file(url, f, quiet = TRUE, mode = "wb") == 0L,
                   error = function(e) FALSE, warning = function(w) FALSE)
    if (ok) return(f)
  }
  fail("version ", ver, " of '", name, "' is not the current one (",
       unname(av[name, "Version"]), ") and is not in the archive of ",
       paste(repos, collapse = ", "), " (src/contrib/Archive/", name,
       "); ask for \"", name, "\" or \"", name, "@", unname(av[name, "Version"]), "\"")
}
# Each requested package's file, the archived ones described by their own DESCRIPTION.
files <- character()
for (i in seq_along(names)) {
  files[names[i]] <- get(names[i], pins[i], dl)
  if (nzchar(pins[i])) {
    d <- tryCatch({
      untar(files[names[i]], files = file.path(names[i], "DESCRIPTION"), exdir = dl)
      read.dcf(file.path(dl, names[i], "DESCRIPTION"))
    }, error = function(e) fail("'", basename(files[names[i]]), "' is no R source package: ", conditionMessage(e)))
    if (!identical(unname(d[1L, "Version"]), pins[i]))
      fail("'", basename(files[names[i]]), "' says it is version ", d[1L, "Version"], ", not ", pins[i])
    for (f in c("Version", fields, "NeedsCompilation"))
      av[names[i], f] <- if (f %in% colnames(d)) d[1L, f] else NA
  }
}
have <- rownames(installed.packages(lib.loc = c(if (dir.exists(cache)) cache, .Library.site, .Library)))
base <- rownames(installed.packages(lib.loc = .Library, priority = "base"))
deps <- tools::package_dependencies(names, db = av, which = fields, recursive = TRUE)
need <- setdiff(unique(unlist(deps, use.names = FALSE)), c(names, have, base, "R"))
lost <- setdiff(need, rownames(av))
if (length(lost))
  fail(paste(names, collapse = ", "), " need", if (length(names) == 1L) "s", " ",
       paste0("'", lost, "'", collapse = ", "), ", which ", if (length(lost) == 1L) "is" else "are",
       " in none of ", paste(repos, collapse = ", "))
for (p in need) files[p] <- get(p, "", dl)
# No compilers here (r-base-dev is not in the image): refuse compiled code before installing anything.
compiled <- names(files)[vapply(names(files), function(p) {
  identical(unname(av[p, "NeedsCompilation"]), "yes") ||
    any(startsWith(untar(files[p], list = TRUE), paste0(p, "/src/")))
}, NA)]
if (length(compiled)) {
  why <- vapply(compiled, function(p) if (p %in% names) p else {
    by <- names[vapply(names, function(n) p %in% deps[[n]], NA)]
    paste0(p, " (needed by ", paste(by, collapse = ", "), ")")
  }, "")
  fail("cannot install ", paste(why, collapse = ", "), ": C/C++/Fortran code to compile ",
       "(NeedsCompilation: yes), and the R runner has no compilers. Use packages written ",
       "in R only, or the libraries the image has (list_runners)")
}
# In dependency order, into the staging library.
todo <- names(files)
while (length(todo)) {
  d1 <- tools::package_dependencies(todo, db = av, which = fields)
  ready <- todo[vapply(todo, function(p) !any(d1[[p]] %in% todo), NA)]
  if (!length(ready)) fail("the dependencies of ", paste(todo, collapse = ", "), " form a cycle")
  for (p in ready) {
    rc <- system2(file.path(R.home("bin"), "R"),
                  c("CMD", "INSTALL", "--no-docs", "--no-html", "--no-multiarch",
                    "-l", shQuote(stage), shQuote(files[p])))
    if (rc != 0L) fail("R CMD INSTALL of '", p, "' failed (exit ", rc, "); its output is above")
    cat("installed ", p, " ", as.character(packageVersion(p, lib.loc = stage)), "\n", sep = "")
  }
  todo <- setdiff(todo, ready)
}
