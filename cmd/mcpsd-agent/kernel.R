# SPDX-License-Identifier: MIT
# mcp-sandboxd kernel: one persistent R global environment per session.
#
# Started by mcpsd-agent (docs/agent-protocol.md) as the runner image's
# sandbox.kernel, e.g. Rscript --vanilla /opt/mcp-sandboxd/kernel.R, with
# descriptors 0 = /dev/null, 1 and 2 = pipes the agent relays as the call's
# output, 3 = frames from the agent, 4 = frames to the agent. A frame is a
# 4-byte big-endian length L, a type byte and L - 1 payload bytes. From the
# agent: E (run a file) and C (the workspace is ready: change to it), both
# TLV records (tag byte, 4-byte length, value). To the agent: R once ready
# (TLV: w = a warning), X with each call's result (JSON, id and status
# first), A after C (TLV: c = the directory, r = an error).
#
# Code runs like R's top level: the file is parsed whole (a syntax error runs
# nothing), then evaluated expression by expression in the global
# environment, which lives as long as this process; the visible values of
# all but the last expression are printed as the console prints them, the
# last one's printed form is the result's value. The first error stops the
# call (R's message, a traceback of the user's calls to stderr and in X);
# warnings are shown after the expression that raised them, as Rscript does.
# Plots drawn without a device of the code's own go to PNG files, reported
# as figure-<id>-<n>.png in the call's directory. SIGINT interrupts a running
# call and is ignored between calls; quit() ends the process (the agent then
# starts a new kernel and reports the exit).
#
# Only base R (and the default packages) is used here. Nothing is kept in
# the global environment but what the code makes: the kernel's own state
# lives in the environment .k below, the code's in .GlobalEnv.

local({
  k <- new.env(parent = baseenv())
  k$FRAME_IN_MAX <- 1048576 # longest L the agent sends
  k$FRAME_OUT_MAX <- 262144 # longest L the agent accepts
  k$REPR_MAX <- 65536 # bytes of the value's text
  k$TRACEBACK_MAX <- 32768
  k$EVALUE_MAX <- 4096
  k$FIGURES_MAX <- 50 # figures reported per call
  k$FIG_WIDTH_IN <- 7
  k$FIG_HEIGHT_IN <- 5
  k$FIG_DPI <- 100
  k$home <- getwd()

  # ---- frames -------------------------------------------------------------

  # The control descriptors, opened anew through /proc (R cannot adopt an
  # inherited descriptor); raw: no compression sniffing, which would read.
  k$fin <- file("/proc/self/fd/3", open = "rb", raw = TRUE)
  k$fout <- file("/proc/self/fd/4", open = "wb", raw = TRUE)

  # n bytes; the end of input (three empty reads in a row: one may be a
  # read cut short by a signal) ends the kernel.
  k$read_exact <- function(n) {
    buf <- raw(0)
    empty <- 0
    while (length(buf) < n) {
      more <- readBin(k$fin, "raw", n - length(buf))
      empty <- if (length(more) == 0) empty + 1 else 0
      if (empty >= 3) quit(save = "no", status = 0) # the agent is gone
      buf <- c(buf, more)
    }
    buf
  }

  k$be32 <- function(n) {
    as.raw(c(n %/% 16777216, (n %/% 65536) %% 256, (n %/% 256) %% 256, n %% 256))
  }

  k$from_be32 <- function(r) {
    sum(as.numeric(as.integer(r)) * c(16777216, 65536, 256, 1))
  }

  k$recv <- function() {
    len <- k$from_be32(k$read_exact(4))
    if (len < 1 || len > k$FRAME_IN_MAX) quit(save = "no", status = 70)
    data <- k$read_exact(len)
    list(type = rawToChar(data[1]), payload = data[-1])
  }

  k$send <- function(type, payload) {
    if (length(payload) + 1 > k$FRAME_OUT_MAX) stop("frame too long")
    writeBin(c(k$be32(length(payload) + 1), charToRaw(type), payload), k$fout)
    flush(k$fout)
  }

  # The records of a TLV payload: a list of raw values named by tag.
  k$tlv <- function(p) {
    out <- list()
    i <- 1
    n <- length(p)
    while (i <= n) {
      if (n - i + 1 < 5) quit(save = "no", status = 70)
      tag <- rawToChar(p[i])
      len <- k$from_be32(p[(i + 1):(i + 4)])
      i <- i + 5
      if (len > n - i + 1) quit(save = "no", status = 70)
      value <- if (len > 0) p[i:(i + len - 1)] else raw(0)
      out[[length(out) + 1]] <- value
      names(out)[length(out)] <- tag
      i <- i + len
    }
    out
  }

  k$record <- function(tag, value) {
    b <- charToRaw(enc2utf8(value))
    c(charToRaw(tag), k$be32(length(b)), b)
  }

  # The last record with tag in fields as text, or NULL.
  k$field <- function(fields, tag) {
    v <- fields[names(fields) == tag]
    if (length(v) == 0) NULL else rawToChar(v[[length(v)]])
  }

  # ---- text and JSON ------------------------------------------------------

  # s as valid UTF-8 (invalid bytes become U+FFFD), one string.
  k$utf8 <- function(s) {
    s <- paste(s, collapse = "\n")
    if (!validUTF8(s)) {
      s <- iconv(s, from = "UTF-8", to = "UTF-8", sub = "\ufffd")
      if (is.na(s)) s <- "?"
    }
    Encoding(s) <- "UTF-8"
    s
  }

  # s cut to at most limit bytes of UTF-8, with a note when cut.
  k$cap <- function(s, limit) {
    s <- k$utf8(s)
    b <- charToRaw(s)
    if (length(b) <= limit) return(s)
    note <- sprintf("\n... [truncated: %d bytes in all]", length(b))
    keep <- max(0, limit - nchar(note, "bytes"))
    cut <- iconv(rawToChar(b[seq_len(keep)]), "UTF-8", "UTF-8", sub = "")
    paste0(if (is.na(cut)) "" else cut, note)
  }

  k$json_str <- function(s) {
    if (is.null(s)) return("null")
    s <- k$utf8(s)
    s <- gsub("\\", "\\\\", s, fixed = TRUE)
    s <- gsub("\"", "\\\"", s, fixed = TRUE)
    s <- gsub("\n", "\\n", s, fixed = TRUE)
    s <- gsub("\r", "\\r", s, fixed = TRUE)
    s <- gsub("\t", "\\t", s, fixed = TRUE)
    m <- gregexpr("[\\x01-\\x1f\\x7f]", s, perl = TRUE)
    if (m[[1]][1] != -1) {
      regmatches(s, m) <- list(vapply(regmatches(s, m)[[1]], function(ch) {
        sprintf("\\u%04x", utf8ToInt(ch))
      }, ""))
    }
    paste0("\"", s, "\"")
  }

  k$json_obj <- function(pairs) {
    keys <- vapply(names(pairs), k$json_str, "", USE.NAMES = FALSE)
    paste0("{", paste0(keys, ":", unlist(pairs), collapse = ","), "}")
  }

  k$json_strs <- function(v) {
    paste0("[", paste(vapply(v, k$json_str, ""), collapse = ","), "]")
  }

  # ---- errors and warnings ------------------------------------------------

  # The user's calls on the stack when a condition was signalled: those
  # after the kernel's own evaluation of the expression, without the
  # condition machinery's frames.
  k$user_calls <- function(calls) {
    n <- length(calls)
    start <- 0
    for (i in seq_len(n)) {
      f <- calls[[i]][[1]]
      if (is.name(f) && as.character(f) == ".mcpsd_top") start <- i
    }
    if (start == 0) return(list())
    i <- start + 1
    while (i <= n && is.name(calls[[i]][[1]]) &&
      as.character(calls[[i]][[1]]) %in% c("withVisible", "eval")) {
      i <- i + 1
    }
    if (i > n) return(list())
    keep <- calls[i:n]
    drop <- c(".handleSimpleError", "h", "signalCondition", "withOneRestart",
              "withRestarts", "doWithOneRestart", ".signalSimpleWarning")
    while (length(keep) > 0) {
      f <- keep[[length(keep)]][[1]]
      if (is.name(f) && as.character(f) %in% drop) {
        keep <- keep[-length(keep)]
      } else if (is.function(f)) {
        keep <- keep[-length(keep)] # the handler itself
      } else {
        break
      }
    }
    keep
  }

  # R's traceback() of calls: the innermost first, "n: call at file#line".
  k$traceback_text <- function(calls) {
    if (length(calls) == 0) return("")
    lines <- character(0)
    for (i in rev(seq_along(calls))) {
      call <- calls[[i]]
      d <- tryCatch(deparse(call, nlines = 1L, width.cutoff = 80L)[1],
                    error = function(e) "<call>")
      sr <- attr(call, "srcref")
      if (!is.null(sr)) {
        f <- attr(sr, "srcfile")
        name <- if (!is.null(f) && !is.null(f$filename)) basename(f$filename) else "?"
        d <- sprintf("%s at %s#%d", d, name, sr[1])
      }
      lines <- c(lines, sprintf("%d: %s", i, d))
    }
    paste(lines, collapse = "\n")
  }

  # A condition's call, unless it is the kernel's own eval (a stop() or
  # warning() at the top level of the code has no call of the user's).
  k$cond_call <- function(cond) {
    call <- conditionCall(cond)
    if (is.call(call) && identical(call[[1]], as.name("eval")) &&
      identical(call[[3]], as.name(".GlobalEnv"))) {
      return(NULL)
    }
    call
  }

  # How R's top level says it: "Error in f(x) : boom" or "Error: boom".
  k$error_line <- function(e) {
    msg <- conditionMessage(e)
    call <- k$cond_call(e)
    if (is.null(call)) return(paste0("Error: ", msg))
    d <- tryCatch(deparse(call, nlines = 1L)[1], error = function(x) "<call>")
    sep <- if (nchar(d) + nchar(msg) > 58 || grepl("\n", msg)) "\n  " else " "
    paste0("Error in ", d, " :", sep, msg)
  }

  k$warning_text <- function(ws) {
    one <- function(w) {
      call <- k$cond_call(w)
      if (is.null(call)) return(conditionMessage(w))
      d <- tryCatch(deparse(call, nlines = 1L)[1], error = function(x) "<call>")
      paste0("In ", d, " : ", conditionMessage(w))
    }
    if (length(ws) == 1) return(paste0("Warning message:\n", one(ws[[1]]), "\n"))
    body <- vapply(seq_along(ws), function(i) sprintf("%d: %s", i, one(ws[[i]])), "")
    more <- if (length(ws) >= 50) "\n(only the first 50 are shown)" else ""
    paste0("Warning messages:\n", paste(body, collapse = "\n"), more, "\n")
  }

  # ---- figures -------------------------------------------------------------

  # Plots without a device of the code's own open one of these: PNG files
  # in a directory of the call's, one file a page, renamed at the end.
  k$fig_dir <- NULL
  k$fig_devices <- 0
  k$device <- function(...) {
    k$fig_devices <- k$fig_devices + 1
    grDevices::png(
      filename = file.path(k$fig_dir, sprintf("d%03d-%%03d.png", k$fig_devices)),
      width = k$FIG_WIDTH_IN, height = k$FIG_HEIGHT_IN, units = "in",
      res = k$FIG_DPI, type = if (capabilities("cairo")) "cairo" else "Xlib"
    )
  }

  # Closes every device (a page still being drawn is written out) and moves
  # the pages into cwd as figure-<id>-<n>.png, in the order drawn.
  k$save_figures <- function(id, cwd) {
    while (grDevices::dev.cur() > 1) try(grDevices::dev.off(), silent = TRUE)
    files <- sort(list.files(k$fig_dir, pattern = "[.]png$", full.names = TRUE))
    names <- character(0)
    for (f in files) {
      if (length(names) >= k$FIGURES_MAX) break
      name <- sprintf("figure-%s-%d.png", id, length(names) + 1)
      dest <- file.path(cwd, name)
      ok <- tryCatch(file.copy(f, dest, overwrite = TRUE), error = function(e) FALSE)
      if (isTRUE(ok)) names <- c(names, name)
    }
    dropped <- length(files) - length(names)
    if (dropped > 0) {
      cat(sprintf("%d more figures were not saved (at most %d a call)\n",
                  dropped, k$FIGURES_MAX), file = stderr())
    }
    unlink(k$fig_dir, recursive = TRUE)
    k$fig_dir <- NULL
    names
  }

  # ---- one call -----------------------------------------------------------

  k$flush_all <- function() {
    try(flush(stdout()), silent = TRUE)
    try(flush(stderr()), silent = TRUE)
  }

  # Prints a value the way R's top level does.
  k$print_value <- function(v) {
    if (isS4(v)) methods::show(v) else print(v)
  }

  # Evaluates one top-level expression; warnings collected in k$warnings.
  .mcpsd_top <- function(expr) withVisible(eval(expr, .GlobalEnv))

  k$eval_one <- function(expr, last) {
    k$warnings <- list()
    res <- withCallingHandlers(
      .mcpsd_top(expr),
      warning = function(w) {
        level <- getOption("warn", 0)
        if (level < 0) {
          invokeRestart("muffleWarning")
        } else if (level >= 1) {
          call <- k$cond_call(w)
          cat("Warning", if (is.null(call)) ":" else
            paste0(" in ", deparse(call, nlines = 1L)[1], " :"),
            " ", conditionMessage(w), "\n", sep = "", file = stderr())
          invokeRestart("muffleWarning")
        } else if (length(k$warnings) < 50) {
          k$warnings[[length(k$warnings) + 1]] <- w
          invokeRestart("muffleWarning")
        } else {
          invokeRestart("muffleWarning")
        }
      },
      error = function(e) {
        k$err_calls <- k$user_calls(sys.calls())
      }
    )
    text <- NULL
    if (res$visible) {
      if (last) {
        out <- utils::capture.output(k$print_value(res$value))
        if (length(out) > 0) text <- paste(out, collapse = "\n")
      } else {
        k$print_value(res$value)
      }
    }
    k$flush_all()
    if (length(k$warnings) > 0) {
      cat(k$warning_text(k$warnings), file = stderr())
      k$warnings <- list()
    }
    text
  }

  k$set_error <- function(result, e, status, calls) {
    line <- k$error_line(e)
    tb <- k$traceback_text(calls)
    cat(line, "\n", file = stderr(), sep = "")
    if (nzchar(tb)) cat("Traceback (innermost first):\n", tb, "\n", file = stderr(), sep = "")
    result$status <- status
    result$error <- list(
      ename = class(e)[1],
      evalue = k$cap(conditionMessage(e), k$EVALUE_MAX),
      traceback = k$cap(paste0(line, if (nzchar(tb)) paste0("\n", tb) else "", "\n"),
                        k$TRACEBACK_MAX)
    )
    result
  }

  # run_code's inputs, when the call has them, as the variable inputs.
  k$inputs <- function(filename) {
    path <- file.path(dirname(filename), "inputs.json")
    if (!file.exists(path)) return(invisible())
    if (!requireNamespace("jsonlite", quietly = TRUE)) {
      cat("inputs were given but this image has no jsonlite to read them\n",
          file = stderr())
      return(invisible())
    }
    assign("inputs", jsonlite::fromJSON(path, simplifyVector = TRUE), envir = .GlobalEnv)
  }

  # The conversation's packages (installed by the daemon before the call,
  # lib/run/packages.h) ahead of the image's own.
  k$packages <- function() {
    dir <- Sys.getenv("MCPSD_R_PACKAGES")
    if (nzchar(dir) && dir.exists(dir) && !(dir %in% .libPaths())) {
      .libPaths(c(dir, .libPaths()))
    }
  }

  k$run <- function(filename, result, id, cwd) {
    exprs <- tryCatch(
      parse(file = filename, keep.source = TRUE, encoding = "UTF-8"),
      error = function(e) e
    )
    if (inherits(exprs, "error")) {
      e <- simpleCondition(conditionMessage(exprs))
      class(e) <- c("ParseError", "error", "condition")
      return(k$set_error(result, e, "error", list()))
    }
    n <- length(exprs)
    for (i in seq_len(n)) {
      k$err_calls <- list()
      out <- tryCatch(
        list(ok = TRUE, text = k$eval_one(exprs[[i]], i == n)),
        error = function(e) list(ok = FALSE, cond = e, status = "error"),
        interrupt = function(e) list(ok = FALSE, cond = e, status = "interrupted")
      )
      k$flush_all()
      if (length(k$warnings) > 0) {
        cat(k$warning_text(k$warnings), file = stderr())
        k$warnings <- list()
      }
      if (!out$ok) {
        cond <- out$cond
        if (out$status == "interrupted") {
          cond <- simpleCondition("the call was interrupted")
          class(cond) <- c("interrupt", "condition")
        }
        return(k$set_error(result, cond, out$status, k$err_calls))
      }
      if (i == n && !is.null(out$text)) {
        result$value <- list("text/plain" = k$cap(out$text, k$REPR_MAX))
      }
    }
    result
  }

  # The call's environment variables, set for it and set back after.
  k$apply_env <- function(fields) {
    saved <- list()
    for (v in fields[names(fields) == "v"]) {
      kv <- rawToChar(v)
      eq <- regexpr("=", kv, fixed = TRUE)
      if (eq < 2) next
      name <- substr(kv, 1, eq - 1)
      if (is.null(saved[[name]])) saved[[name]] <- Sys.getenv(name, unset = NA)
      do.call(Sys.setenv, stats::setNames(list(substring(kv, eq + 1)), name))
    }
    saved
  }

  k$undo_env <- function(saved) {
    for (name in names(saved)) {
      old <- saved[[name]]
      if (is.na(old)) Sys.unsetenv(name)
      else do.call(Sys.setenv, stats::setNames(list(old), name))
    }
  }

  k$encode <- function(r) {
    value <- if (is.null(r$value)) "null" else k$json_obj(lapply(r$value, k$json_str))
    error <- if (is.null(r$error)) "null" else k$json_obj(lapply(r$error, k$json_str))
    paste0(
      "{\"id\":", r$id, ",\"status\":", k$json_str(r$status),
      ",\"value\":", value, ",\"error\":", error,
      ",\"figures\":", if (length(r$figures)) k$json_strs(r$figures) else "[]",
      ",\"exit_code\":null,\"background\":{\"threads\":0,\"dropped_bytes\":0}",
      ",\"state\":null}"
    )
  }

  k$execute <- function(payload) {
    fields <- k$tlv(payload)
    id <- k$field(fields, "n")
    filename <- k$field(fields, "f")
    if (is.null(id) || is.null(filename) || !grepl("^[0-9]{1,16}$", id)) {
      quit(save = "no", status = 70)
    }
    result <- list(id = id, status = "ok", value = NULL,
                   error = NULL, figures = character(0))
    saved <- k$apply_env(fields)
    cwd <- k$field(fields, "c")
    k$fig_dir <- file.path(tempdir(), paste0("figures-", id))
    dir.create(k$fig_dir, showWarnings = FALSE, recursive = TRUE)
    rewind <- k$field(fields, "L")
    if (!is.null(cwd)) try(setwd(cwd), silent = TRUE)
    cwd <- getwd()
    if (!is.null(rewind) && rewind != "latest") {
      # Nothing is saved for R, so there is nothing to go back to.
      e <- simpleCondition(paste0(
        "R sessions are not saved between runs, so there is no run ", rewind,
        " to go back to; start over with session \"new\" and run the setup again"))
      class(e) <- c("StateError", "error", "condition")
      result <- k$set_error(result, e, "error", list())
    } else {
      result <- tryCatch({
        k$packages()
        k$inputs(filename)
        k$run(filename, result, id, cwd)
      }, error = function(e) k$set_error(result, e, "error", list()),
      interrupt = function(e) {
        cond <- simpleCondition("the call was interrupted")
        class(cond) <- c("interrupt", "condition")
        k$set_error(result, cond, "interrupted", list())
      })
    }
    result$figures <- tryCatch(k$save_figures(id, cwd), error = function(e) character(0))
    k$undo_env(saved)
    try(setwd(k$home), silent = TRUE)
    k$flush_all()
    payload <- charToRaw(k$encode(result))
    if (length(payload) + 1 > k$FRAME_OUT_MAX) {
      result$value <- NULL
      result$error$traceback <- k$cap(result$error$traceback, 8192)
      payload <- charToRaw(k$encode(result))
    }
    k$send("X", payload)
  }

  k$claim <- function(payload) {
    fields <- k$tlv(payload)
    out <- raw(0)
    dir <- k$field(fields, "c")
    ok <- !is.null(dir) && tryCatch({
      setwd(dir)
      TRUE
    }, error = function(e) {
      out <<- c(out, k$record("r", paste("cannot change directory:", conditionMessage(e))))
      FALSE
    })
    if (ok) k$home <- getwd()
    k$send("A", c(out, k$record("c", getwd())))
  }

  k$main <- function() {
    options(device = k$device, warn = 0, keep.source = TRUE)
    args <- commandArgs(trailingOnly = TRUE)
    ready <- raw(0)
    if (length(args) >= 1 && args[1] == "--preload") {
      ready <- k$record("w", "the R kernel preloads nothing; --preload ignored")
    }
    k$send("R", ready)
    repeat {
      # An interrupt that comes between calls (just after one ended) is
      # taken here and ignored, not by the next call.
      frame <- tryCatch(k$recv(), interrupt = function(e) NULL)
      if (is.null(frame)) next
      tryCatch(Sys.sleep(0), interrupt = function(e) NULL)
      if (frame$type == "E") {
        k$execute(frame$payload)
      } else if (frame$type == "C") {
        k$claim(frame$payload)
      } else {
        quit(save = "no", status = 70)
      }
    }
  }

  k$k <- k
  environment(.mcpsd_top) <- k
  k$.mcpsd_top <- .mcpsd_top
  for (name in ls(k)) {
    if (is.function(k[[name]])) environment(k[[name]]) <- k
  }
  k$main()
})
