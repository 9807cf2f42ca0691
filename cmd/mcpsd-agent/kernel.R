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
# first, and "state", the durable state's report), A after C (TLV: c = the
# directory, r = an error).
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
# starts a new kernel and reports the exit). When the E frame names a
# state directory (s), the global environment is saved there after each
# call, when idle, and loaded back by a new kernel (see "durable state").
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
  # read cut short by a signal) ends the kernel. The bytes the idle wait
  # before a save took (k$stash) come first.
  k$stash <- raw(0)
  k$read_exact <- function(n) {
    buf <- k$stash[seq_len(min(n, length(k$stash)))]
    k$stash <- k$stash[-seq_len(length(buf))]
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

  # Any value of the state reports as JSON: NULL is null, a list with
  # names an object, one without an array, a length-one vector a scalar.
  k$json <- function(x) {
    if (is.null(x)) return("null")
    if (is.list(x)) {
      items <- vapply(x, k$json, "", USE.NAMES = FALSE)
      if (is.null(names(x))) return(paste0("[", paste(items, collapse = ","), "]"))
      return(paste0("{", paste0(vapply(names(x), k$json_str, "", USE.NAMES = FALSE),
                                ":", items, collapse = ","), "}"))
    }
    if (length(x) != 1 || is.na(x)) return("null")
    if (is.logical(x)) return(if (x) "true" else "false")
    if (is.numeric(x)) {
      if (!is.finite(x)) return("null")
      return(if (x == round(x) && abs(x) < 1e15) sprintf("%.0f", x) else sprintf("%.15g", x))
    }
    k$json_str(as.character(x))
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

  # ---- durable state -------------------------------------------------------
  #
  # After every call the kernel saves the global environment (the E frame's
  # s record names the directory, /data/.mcp/state/r in the conversation's
  # workspace: the state counts against its quota and expires with it) once
  # the result is sent and no frame has come for STATE_IDLE_S, so neither
  # the call nor one that follows at once waits for it. A new kernel loads
  # the newest save before its first call when the E frame asks (L
  # "latest"), or the save of an earlier run (L = its number: a rewind),
  # after attaching again the packages that were attached. Each save is a
  # file run-<n>.state written aside and renamed, so a crash never leaves
  # half of one; the newest K (the E frame's K) are kept. What holds a live
  # handle of C code (a connection, a database connection, any external
  # pointer, an environment or function holding one) and active bindings
  # are left out and named. A save is code-bearing data written by the
  # conversation's own code: only this kernel, in the conversation's own
  # box, ever reads it (the daemon never does).
  #
  # Layout: STATE_MAGIC, then two objects as serialize() writes them
  # (version 3, native byte order, uncompressed: fast): the metadata (run,
  # time, R version, attached packages, what was left out), then the named
  # list of the saved objects, whole, so two names that share an
  # environment still share it after a restore.

  k$STATE_MAGIC <- "MCPSD-STATE-R 1\n"
  k$STATE_REPORT_NAMES <- 50 # names listed in a report; the rest are counted
  k$STATE_NAME_MAX <- 120 # bytes of a name in a report
  k$STATE_IDLE_S <- 0.1 # a save waits for this long without a new frame
  k$dur <- new.env(parent = emptyenv())
  k$dur$dir <- NULL # the state directory (E's s), NULL: saving is off
  k$dur$cap <- 0 # most bytes a save may take (E's z)
  k$dur$keep <- 1 # saves kept (E's K)
  k$dur$seq <- NULL # the newest run saved or restored; NULL: not looked
  k$dur$report <- NULL # the last save's report, for the next X
  k$dur$restore <- NULL # this call's restore or rewind, for its X
  k$dur$pending <- FALSE # the last call's state is not saved yet
  k$dur$kept <- NULL # the runs saved in dir (NULL: look again)
  k$base_search <- character(0) # search() when the kernel started
  k$fpoll <- NULL # descriptor 3 again, not blocking: the idle wait

  k$cond <- function(class, msg) {
    structure(class = c(class, "error", "condition"),
              list(message = msg, call = NULL))
  }

  k$state_error <- function(msg) stop(k$cond("StateError", msg))

  # The run numbers saved in d, oldest first.
  k$state_runs <- function(d) {
    files <- tryCatch(list.files(d, pattern = "^run-[0-9]{1,15}[.]state$"),
                      error = function(e) character(0))
    sort(as.numeric(sub("^run-([0-9]+)[.]state$", "\\1", files)))
  }

  k$state_path <- function(d, run) file.path(d, sprintf("run-%.0f.state", run))

  k$runs_text <- function(runs) {
    if (length(runs) == 0) "none" else paste(sprintf("%.0f", runs), collapse = ", ")
  }

  k$note <- function(items, name, why) {
    if (length(items) < k$STATE_REPORT_NAMES) {
      items[[length(items) + 1]] <- list(name = k$cap(name, k$STATE_NAME_MAX),
                                         why = k$cap(why, 300))
    }
    items
  }

  # serialize()'s hook for reference objects: an external pointer or a
  # weak reference would come back as a dead handle, so it stops the save.
  k$no_handles <- function(x) {
    if (typeof(x) %in% c("externalptr", "weakref")) {
      stop(k$cond("mcpsd_handle", "a live handle"))
    }
    NULL
  }

  # Why value cannot be saved, in words, or NULL when it can: serialised
  # into /dev/null, so it costs time but no memory.
  k$why_unsaved <- function(value) {
    sink <- file("/dev/null", open = "wb")
    on.exit(close(sink))
    err <- tryCatch({
      serialize(value, sink, xdr = FALSE, refhook = k$no_handles)
      NULL
    }, mcpsd_handle = function(e) "", error = function(e) conditionMessage(e))
    if (is.null(err)) return(NULL)
    if (nzchar(err)) {
      return(sprintf("a %s that cannot be serialised (%s)", class(value)[1], k$cap(err, 200)))
    }
    if (inherits(value, "connection")) return("a connection (open it again)")
    if (inherits(value, "DBIConnection")) return("a database connection (connect again)")
    if (is.environment(value)) {
      return("an environment holding a connection or another live handle of C code")
    }
    if (is.function(value)) {
      return("a function whose environment holds a connection or another live handle of C code")
    }
    sprintf("a %s holding a live handle of C code (an external pointer)", class(value)[1])
  }

  # The packages attached since the kernel started, the newest first.
  k$attached <- function() {
    s <- search()
    sub("^package:", "", s[startsWith(s, "package:") & !(s %in% k$base_search)])
  }

  # The global environment's objects, and what is left out before trying.
  # A data.table's self-reference (an external pointer data.table makes
  # again) is dropped from the copy that is saved.
  k$state_objects <- function() {
    env <- .GlobalEnv
    data <- list()
    unsaved <- list()
    more <- 0
    for (name in ls(env, all.names = TRUE, sorted = TRUE)) {
      why <- NULL
      value <- NULL
      if (bindingIsActive(name, env)) {
        why <- "an active binding (makeActiveBinding)"
      } else {
        value <- tryCatch(get(name, envir = env, inherits = FALSE), error = function(e) {
          why <<- paste("it could not be read:", conditionMessage(e))
          NULL
        })
      }
      if (!is.null(why)) {
        if (length(unsaved) < k$STATE_REPORT_NAMES) unsaved <- k$note(unsaved, name, why)
        else more <- more + 1
        next
      }
      if (inherits(value, "data.table")) attr(value, ".internal.selfref") <- NULL
      data[name] <- list(value)
    }
    list(data = data, unsaved = unsaved, more = more)
  }

  # Writes a state file; its size. mcpsd_handle when an object holds a
  # live handle, mcpsd_write when the file system did not take it all.
  k$state_write <- function(path, meta, data) {
    con <- file(path, open = "wb")
    closed <- FALSE
    on.exit(if (!closed) try(close(con), silent = TRUE))
    # (A handler's own stop() would be caught by the tryCatch's other
    # handlers: the condition comes out as the value and is raised after.)
    failed <- tryCatch({
      writeBin(charToRaw(k$STATE_MAGIC), con)
      serialize(meta, con, xdr = FALSE)
      serialize(data, con, xdr = FALSE, refhook = k$no_handles)
      NULL
    }, mcpsd_handle = function(e) e,
    error = function(e) k$cond("mcpsd_write", conditionMessage(e)))
    if (!is.null(failed)) stop(failed)
    n <- seek(con)
    close(con)
    closed <- TRUE
    if (!isTRUE(file.size(path) == n)) {
      stop(k$cond("mcpsd_write", "the file system did not take all of it"))
    }
    n
  }

  # Saves the global environment as run's state in d; returns the report.
  k$save <- function(d, run) {
    obj <- k$state_objects()
    cap <- k$dur$cap
    # An estimate first (object.size counts strings generously): a state
    # clearly over the cap is not written at all.
    est <- sum(vapply(obj$data, function(v) as.numeric(utils::object.size(v)), 0))
    if (cap > 0 && est > 2 * cap) stop(k$cond("mcpsd_big", "over the cap"))
    dir.create(d, recursive = TRUE, showWarnings = FALSE)
    tmp <- file.path(d, sprintf(".run-%.0f.tmp-%d", run, Sys.getpid()))
    on.exit(unlink(tmp))
    meta <- function() {
      list(v = 1, run = run, saved_at = as.numeric(Sys.time()),
           r = paste(R.version$major, R.version$minor, sep = "."),
           packages = k$attached(), unsaved = obj$unsaved, unsaved_more = obj$more)
    }
    size <- tryCatch(k$state_write(tmp, meta(), obj$data), mcpsd_handle = function(e) NULL)
    if (is.null(size)) {
      # Which objects hold a handle: each alone, then the rest again.
      for (name in names(obj$data)) {
        why <- k$why_unsaved(obj$data[[name]])
        if (is.null(why)) next
        if (length(obj$unsaved) < k$STATE_REPORT_NAMES) {
          obj$unsaved <- k$note(obj$unsaved, name, why)
        } else {
          obj$more <- obj$more + 1
        }
        obj$data[name] <- NULL
      }
      size <- k$state_write(tmp, meta(), obj$data)
    }
    if (cap > 0 && size > cap) stop(k$cond("mcpsd_big", "over the cap"))
    if (!file.rename(tmp, k$state_path(d, run))) {
      stop(k$cond("mcpsd_write", "it could not be renamed into place"))
    }
    list(run = run, bytes = size, names = length(obj$data),
         not_saved = obj$unsaved, not_saved_more = obj$more)
  }

  k$drop_runs <- function(d, runs) {
    for (old in runs) unlink(k$state_path(d, old))
  }

  # Saves the state of the call that just ended (after its X).
  k$autosave <- function() {
    d <- k$dur$dir
    if (is.null(d)) return(invisible())
    t0 <- proc.time()[["elapsed"]]
    if (is.null(k$dur$seq)) {
      runs <- k$state_runs(d)
      k$dur$seq <- if (length(runs)) max(runs) else 0
    }
    run <- k$dur$seq + 1
    report <- list(run = run, ok = FALSE, bytes = NULL, ms = 0,
                   not_saved = list(), error = NULL)
    dropped <- NULL
    attempt <- function() tryCatch(k$save(d, run), error = function(e) e,
                                   interrupt = function(e) e)
    res <- attempt()
    if (inherits(res, "mcpsd_write")) {
      # The workspace may be full: the older saves make room for this one
      # (the newest stays), then one more try.
      runs <- k$state_runs(d)
      if (length(runs) >= 2) {
        dropped <- runs[-length(runs)]
        k$drop_runs(d, dropped)
        res <- attempt()
      }
    }
    if (inherits(res, "mcpsd_big")) {
      report$error <- sprintf(paste0(
        "the state is larger than its cap of %.0f MB (SANDBOX_STATE_MAX_MB, ",
        "at most half the workspace quota): not saved; remove large objects ",
        "(rm(name)) to have it saved again"), floor(k$dur$cap / 1048576))
    } else if (inherits(res, "mcpsd_write")) {
      report$error <- sprintf(paste0(
        "the state could not be written (%s): not saved; if the workspace ",
        "is full, delete files"), k$cap(conditionMessage(res), 200))
    } else if (inherits(res, "interrupt")) {
      report$error <- "the save was interrupted: not saved"
    } else if (inherits(res, "condition")) {
      report$error <- k$cap(paste0(class(res)[1], ": ", conditionMessage(res)), 400)
    } else {
      report[names(res)] <- res
      report$ok <- TRUE
      k$dur$seq <- run
      runs <- k$state_runs(d)
      drop <- max(0, length(runs) - k$dur$keep)
      k$drop_runs(d, runs[seq_len(drop)])
      k$dur$kept <- runs[setdiff(seq_along(runs), seq_len(drop))]
    }
    if (!is.null(dropped)) report$dropped_older <- as.list(dropped)
    report$ms <- round((proc.time()[["elapsed"]] - t0) * 1000)
    k$dur$report <- report
  }

  # Saves the last call's state once no frame has come for STATE_IDLE_S: a
  # call that follows at once runs first, and the state after it is saved
  # instead. R cannot wait on a descriptor with a timeout, so a second,
  # non-blocking reader of descriptor 3 looks every 20 ms; a byte it takes
  # is kept for the frame reader.
  k$autosave_when_idle <- function() {
    if (!isTRUE(k$dur$pending)) return(invisible())
    if (!is.null(k$fpoll)) {
      deadline <- proc.time()[["elapsed"]] + k$STATE_IDLE_S
      repeat {
        got <- tryCatch(readBin(k$fpoll, "raw", 1), error = function(e) raw(0),
                        interrupt = function(e) raw(0))
        if (length(got) > 0) {
          k$stash <- c(k$stash, got)
          return(invisible())
        }
        if (proc.time()[["elapsed"]] >= deadline) break
        tryCatch(Sys.sleep(0.02), interrupt = function(e) NULL)
      }
    }
    k$dur$pending <- FALSE
    tryCatch(k$autosave(), error = function(e) NULL, interrupt = function(e) NULL)
  }

  k$fresh_env <- function() {
    rm(list = ls(.GlobalEnv, all.names = TRUE), envir = .GlobalEnv)
  }

  # Loads a state file into the global environment (after attaching its
  # packages again); returns the report.
  k$load <- function(path) {
    t0 <- proc.time()[["elapsed"]]
    con <- file(path, open = "rb")
    on.exit(close(con))
    magic <- readBin(con, "raw", nchar(k$STATE_MAGIC, "bytes"))
    if (!identical(magic, charToRaw(k$STATE_MAGIC))) stop("not a state file")
    meta <- unserialize(con)
    if (!is.list(meta) || !is.numeric(meta$run)) stop("damaged state file")
    not_restored <- list()
    for (u in meta$unsaved) {
      if (is.list(u)) {
        not_restored <- k$note(not_restored, as.character(u$name)[1],
                               paste("not saved:", as.character(u$why)[1]))
      }
    }
    attached <- character(0)
    for (p in rev(as.character(meta$packages))) {
      err <- tryCatch({
        suppressWarnings(suppressPackageStartupMessages(
          library(p, character.only = TRUE)))
        NULL
      }, error = function(e) conditionMessage(e))
      if (is.null(err)) {
        attached <- c(attached, p)
      } else {
        not_restored <- k$note(not_restored, p,
                               paste0("library(", p, ") failed: ", k$cap(err, 200)))
      }
    }
    data <- unserialize(con)
    if (!is.list(data) || (length(data) > 0 && is.null(names(data)))) {
      stop("damaged state file")
    }
    for (i in seq_along(data)) {
      v <- data[[i]]
      if (inherits(v, "data.table") && requireNamespace("data.table", quietly = TRUE)) {
        v <- tryCatch(data.table::setalloccol(v), error = function(e) v)
      }
      assign(names(data)[i], v, envir = .GlobalEnv)
    }
    list(run = meta$run, saved_at = meta$saved_at,
         ms = round((proc.time()[["elapsed"]] - t0) * 1000),
         names = length(data), imports = as.list(rev(attached)),
         not_restored = not_restored)
  }

  # E's L: "latest" loads the newest save there is (nothing to load is no
  # error), a number the save of that run (a rewind: a StateError when it
  # cannot be done, and the code is not run).
  k$restore <- function(fields) {
    what <- k$field(fields, "L")
    d <- k$dur$dir
    if (is.null(what) || is.null(d)) return(invisible())
    runs <- k$state_runs(d)
    k$dur$kept <- runs
    latest <- what == "latest"
    if (latest) {
      if (length(runs) == 0) {
        k$dur$seq <- 0
        return(invisible())
      }
      candidates <- rev(runs)
    } else {
      if (!grepl("^[0-9]{1,15}$", what)) k$state_error("rewind takes a run number")
      want <- as.numeric(what)
      if (!(want %in% runs)) {
        k$state_error(sprintf("there is no saved state of run %.0f; the saved runs are %s",
                              want, k$runs_text(runs)))
      }
      candidates <- want
    }
    errors <- character(0)
    for (run in candidates) {
      k$fresh_env()
      rep <- tryCatch(k$load(k$state_path(d, run)), error = function(e) {
        errors <<- c(errors, sprintf("run %.0f: %s", run, k$cap(conditionMessage(e), 200)))
        NULL
      })
      if (!is.null(rep)) {
        rep$kind <- if (latest) "restore" else "rewind"
        if (length(errors)) rep$skipped <- as.list(utils::head(errors, 5))
        k$dur$restore <- rep
        k$dur$seq <- max(runs)
        return(invisible())
      }
    }
    k$fresh_env()
    k$dur$seq <- max(runs)
    msg <- paste0("the saved state could not be loaded (",
                  paste(utils::head(errors, 3), collapse = "; "), ")")
    if (!latest) k$state_error(msg)
    k$dur$restore <- list(kind = "restore", error = msg)
  }

  # The E frame's state records: s (directory), z (cap in bytes), K (saves
  # kept). Without s nothing is saved or loaded.
  k$state_fields <- function(fields) {
    d <- k$field(fields, "s")
    if (!identical(d, k$dur$dir)) {
      k$dur$seq <- NULL
      k$dur$kept <- NULL
    }
    k$dur$dir <- d
    z <- k$field(fields, "z")
    if (!is.null(z) && grepl("^[0-9]{1,18}$", z)) k$dur$cap <- as.numeric(z)
    keep <- k$field(fields, "K")
    if (!is.null(keep) && grepl("^[0-9]{1,9}$", keep)) k$dur$keep <- max(1, as.numeric(keep))
  }

  # X's "state": the last save's report (after the previous call), this
  # call's restore or rewind, the number this call's state will be saved
  # under and the runs saved so far; NULL when saving is off.
  k$state_report <- function() {
    if (is.null(k$dur$dir)) return(NULL)
    if (is.null(k$dur$kept)) k$dur$kept <- k$state_runs(k$dur$dir)
    runs <- k$dur$kept
    if (is.null(k$dur$seq)) k$dur$seq <- if (length(runs)) max(runs) else 0
    out <- list(saved = k$dur$report, restored = k$dur$restore,
                run = k$dur$seq + 1, kept = as.list(utils::tail(runs, 64)))
    k$dur$report <- NULL
    k$dur$restore <- NULL
    out
  }

  # The state report with its name lists cut (for a frame that must shrink).
  k$state_small <- function(st) {
    if (!is.list(st)) return(NULL)
    for (key in c("saved", "restored")) {
      r <- st[[key]]
      if (!is.list(r)) next
      for (l in c("not_saved", "not_restored", "imports", "skipped")) {
        if (!is.null(r[[l]])) r[[l]] <- utils::head(r[[l]], 3)
      }
      st[[key]] <- r
    }
    st
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
      ",\"state\":", k$json(r$state), "}"
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
    k$state_fields(fields)
    if (!is.null(cwd)) try(setwd(cwd), silent = TRUE)
    cwd <- getwd()
    result <- tryCatch({
      k$packages()
      k$restore(fields)
      k$inputs(filename)
      k$run(filename, result, id, cwd)
    }, StateError = function(e) {
      # The code is not run: the state it expects is not there.
      msg <- conditionMessage(e)
      cat("StateError: ", msg, "\n", file = stderr(), sep = "")
      result$status <- "error"
      result$error <- list(ename = "StateError", evalue = k$cap(msg, k$EVALUE_MAX),
                           traceback = k$cap(paste0("StateError: ", msg, "\n"), k$TRACEBACK_MAX))
      result
    }, error = function(e) k$set_error(result, e, "error", list()),
    interrupt = function(e) {
      cond <- simpleCondition("the call was interrupted")
      class(cond) <- c("interrupt", "condition")
      k$set_error(result, cond, "interrupted", list())
    })
    result$figures <- tryCatch(k$save_figures(id, cwd), error = function(e) character(0))
    k$undo_env(saved)
    try(setwd(k$home), silent = TRUE)
    k$flush_all()
    result$state <- k$state_report()
    payload <- charToRaw(k$encode(result))
    if (length(payload) + 1 > k$FRAME_OUT_MAX) {
      result$value <- NULL
      if (!is.null(result$error)) result$error$traceback <- k$cap(result$error$traceback, 8192)
      result$state <- k$state_small(result$state)
      payload <- charToRaw(k$encode(result))
    }
    k$send("X", payload)
    k$dur$pending <- !is.null(k$dur$dir)
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
    k$base_search <- search()
    k$fpoll <- tryCatch(fifo("/proc/self/fd/3", open = "rb", blocking = FALSE),
                        error = function(e) NULL)
    args <- commandArgs(trailingOnly = TRUE)
    ready <- raw(0)
    if (length(args) >= 1 && args[1] == "--preload") {
      ready <- k$record("w", "the R kernel preloads nothing; --preload ignored")
    }
    k$send("R", ready)
    repeat {
      # An interrupt that comes between calls (just after one ended) is
      # taken here and ignored, not by the next call.
      tryCatch(k$autosave_when_idle(), interrupt = function(e) NULL)
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
