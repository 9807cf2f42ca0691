# SPDX-License-Identifier: MIT
# Run once when the image is built (with RubyGems): writes the prelude
# (ARGV[0]) that sandbox.command loads with -r into `ruby --disable-gems`.
#
# Why: RubyGems takes about 80 ms of every Ruby start at half a CPU (mostly
# evaluating every default gem's specification), five times what the rest of
# the interpreter's start takes, and a Ruby program is a new process on every
# call. What RubyGems would give a program comes from the prelude instead:
# - the require paths of every installed gem (the newest version of each,
#   the default gems' own files being the standard library's), put before
#   the standard library, where activating the gem would put them, so a gem
#   newer than the default one (csv, say) wins as it does with RubyGems;
# - Gem itself, loaded when a program first names it (autoload), and
#   Kernel#gem, which loads RubyGems first;
# - the error helpers an uncaught exception's message is made with
#   (error_highlight, did_you_mean, syntax_suggest: loaded at exit, before
#   Ruby prints the message, in the order RubyGems' prelude loads them).
# Left different (docs/runners.md): $LOADED_FEATURES lists no RubyGems file,
# Gem.loaded_specs is empty until RubyGems loads, a LoadError's backtrace
# has no RubyGems frame, and a message printed by the program itself (not
# Ruby at exit) has no "Did you mean?" until one was printed at exit.
out = ARGV.fetch(0)
site = RbConfig::CONFIG.fetch("sitelibdir")
paths = Gem::Specification.latest_specs(true)
                          .reject { |s| s.default_gem? || s.name == "rubygems-update" }
                          .sort_by(&:name)
                          .flat_map(&:full_require_paths)
                          .select { |p| File.directory?(p) }
File.write(out, <<~RUBY)
  # frozen_string_literal: true
  # Written by runners/ruby/fast-start.rb when this image was built (see
  # there): the prelude of `ruby --disable-gems` in sandbox.command.
  $LOAD_PATH.insert($LOAD_PATH.index(#{site.dump}) || 0, *#{paths.inspect})
  autoload :Gem, "rubygems"
  module Kernel
    private def gem(...)
      require "rubygems" # defines Kernel#gem anew
      gem(...)
    end
  end
  at_exit do
    if $! && !$!.is_a?(SystemExit)
      begin
        require "error_highlight"
        require "did_you_mean"
        require "syntax_suggest/core_ext" if $!.is_a?(SyntaxError)
      rescue LoadError
      end
    end
  end
RUBY
