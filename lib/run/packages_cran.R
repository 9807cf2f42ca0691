# SPDX-License-Identifier: MIT
# The R installer of packages on demand (lib/run/packages_cran.h), embedded
# in the daemon and run by its sh scripts with Rscript --vanilla in the R
# image, in two boxes, because installing an R source package evaluates its
# R code (lazy loading), and package code must never run with network:
#
#   install.R fetch DOWNLOADS FETCHED REPOS SPEC...
#     in the installer box (network, no package code runs): reads the
#     index of the CRAN-like repositories REPOS (comma-separated), works
#     out the Depends, Imports and LinkingTo the image lacks, downloads
#     them into DOWNLOADS (its private /stage; an older version from
#     src/contrib/Archive, its own DESCRIPTION then describing it), refuses
#     anything with code to compile (no compilers in the image), copies the
#     files into FETCHED (under /data) and prints them in dependency order,
#     one "mcp-sandboxd-fetched FILE" line each. Nothing under /data is
#     read.
#   install.R install CACHE STAGE FETCHED REQUESTED FILE...
#     in a box without network: R CMD INSTALL of each FILE in FETCHED into
#     the library STAGE, in the order given, except a dependency CACHE (the
#     conversation's R library) already has (REQUESTED, comma-separated, are
#     always installed).
#
# Each SPEC is a name with an optional exact version after '@' and each
# FILE is name_version.tar.gz (both checked by the daemon). A failure is one
# line on stderr that starts with "mcp-sandboxd: " and says what to do;
# exit status 1.
a <- commandArgs(TRUE)
say <- function(...) cat("mcp-sandboxd: ", ..., "\n", sep = "", file = stderr())
fail <- function(...) { say(...); quit(save = "no", status = 1L) }
options(timeout = 60, warn = 1, useFancyQuotes = FALSE)
fields <- c("Depends", "Imports", "LinkingTo")
MAX_FILES <- 60L

fetch <- function(dl, fetched, repos, specs) {
  options(repos = repos)
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
  for (n in names) if (!n %in% rownames(av)) {
    near <- rownames(av)[tolower(rownames(av)) == tolower(n)]
    fail("package '", n, "' is not in ", paste(repos, collapse = ", "),
         if (length(near)) paste0("; names are case-sensitive: did you mean '", near[1L], "'?")
         else "; check the name (as on CRAN, e.g. \"data.table\")")
  }
  get <- function(name, ver) {
    cur <- unname(av[name, "Version"])
    if (!nzchar(ver) || identical(cur, ver)) {
      r <- tryCatch(download.packages(name, dl, available = av, repos = repos,
                                      type = "source", quiet = TRUE),
                    error = function(e) e, warning = function(w) w)
      if (inherits(r, "condition") || !length(r) || !file.exists(r[1L, 2L]))
        fail("could not download '", name, "' from ", unname(av[name, "Repository"]), ": ",
             if (inherits(r, "condition")) conditionMessage(r) else "no file")
      return(r[1L, 2L])
    }
    f <- file.path(dl, paste0(name, "_", ver, ".tar.gz"))
    for (u in repos) {
      url <- paste0(sub("/+$", "", u), "/src/contrib/Archive/", name, "/", basename(f))
      ok <- tryCatch(download.file(url, f, quiet = TRUE, mode = "wb") == 0L,
                     error = function(e) FALSE, warning = function(w) FALSE)
      if (ok) return(f)
    }
    fail("version ", ver, " of '", name, "' is not the current one (", cur,
         ") and is not in the archive of ", paste(repos, collapse = ", "),
         " (src/contrib/Archive/", name, "); ask for \"", name, "\" or \"",
         name, "@", cur, "\"")
  }
  # The requested files; an archived one is described by its own DESCRIPTION.
  files <- character()
  for (i in seq_along(names)) {
    files[names[i]] <- get(names[i], pins[i])
    if (nzchar(pins[i])) {
      d <- tryCatch({
        untar(files[names[i]], files = file.path(names[i], "DESCRIPTION"), exdir = dl)
        read.dcf(file.path(dl, names[i], "DESCRIPTION"))
      }, error = function(e) fail("'", basename(files[names[i]]), "' is no R source package: ",
                                  conditionMessage(e)))
      if (!identical(unname(d[1L, "Version"]), pins[i]))
        fail("'", basename(files[names[i]]), "' says it is version ", d[1L, "Version"],
             ", not ", pins[i])
      for (f in c("Version", fields, "NeedsCompilation"))
        av[names[i], f] <- if (f %in% colnames(d)) d[1L, f] else NA
    }
  }
  # What the image has (its site library and R's own) is not fetched.
  have <- rownames(installed.packages(lib.loc = c(.Library.site, .Library)))
  deps <- tools::package_dependencies(names, db = av, which = fields, recursive = TRUE)
  need <- setdiff(unique(unlist(deps, use.names = FALSE)), c(names, have, "R"))
  lost <- setdiff(need, rownames(av))
  if (length(lost))
    fail(paste(names, collapse = ", "), " need", if (length(names) == 1L) "s", " ",
         paste0("'", lost, "'", collapse = ", "), ", which ",
         if (length(lost) == 1L) "is" else "are", " in none of ", paste(repos, collapse = ", "))
  if (length(names) + length(need) > MAX_FILES)
    fail("these packages need ", length(names) + length(need), " packages the image lacks, ",
         "more than the ", MAX_FILES, " one call installs; ask for fewer at once")
  for (p in need) files[p] <- get(p, "")
  # No compilers here (r-base-dev is not in the image).
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
  # Dependency order.
  todo <- names(files)
  while (length(todo)) {
    d1 <- tools::package_dependencies(todo, db = av, which = fields)
    ready <- todo[vapply(todo, function(p) !any(d1[[p]] %in% todo), NA)]
    if (!length(ready)) fail("the dependencies of ", paste(todo, collapse = ", "), " form a cycle")
    for (p in ready) {
      if (!file.copy(files[p], file.path(fetched, basename(files[p])), overwrite = TRUE))
        fail("cannot copy ", basename(files[p]), " into ", fetched)
      cat("mcp-sandboxd-fetched ", basename(files[p]), "\n", sep = "")
    }
    todo <- setdiff(todo, ready)
  }
}

install <- function(cache, stage, fetched, requested, files) {
  .libPaths(c(stage, if (dir.exists(cache)) cache))
  Sys.setenv(R_LIBS = paste(.libPaths(), collapse = ":"), R_LIBS_USER = " ")
  for (f in files) {
    p <- sub("_.*", "", f)
    if (!p %in% requested && file.exists(file.path(cache, p, "DESCRIPTION"))) next
    rc <- system2(file.path(R.home("bin"), "R"),
                  c("CMD", "INSTALL", "--no-docs", "--no-html", "--no-multiarch",
                    "-l", shQuote(stage), shQuote(file.path(fetched, f))))
    if (rc != 0L) fail("R CMD INSTALL of '", p, "' failed (exit ", rc, "); its output is above")
    cat("installed ", p, " ", as.character(packageVersion(p, lib.loc = stage)), "\n", sep = "")
  }
}

if (identical(a[1L], "fetch")) {
  fetch(a[2L], a[3L], strsplit(a[4L], ",", fixed = TRUE)[[1L]], a[-(1:4)])
} else if (identical(a[1L], "install")) {
  install(a[2L], a[3L], a[4L], strsplit(a[5L], ",", fixed = TRUE)[[1L]], a[-(1:5)])
} else {
  fail("install.R: fetch or install")
}
