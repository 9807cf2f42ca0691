#!/usr/bin/env bash
# Measure what one run costs in each runner image under the daemon's default
# limits (--cpus 0.5 --memory 256m, read-only root, /tmp tmpfs, no network,
# uid 64321): a hello world through the image's own sandbox.command, and for
# the compiled languages a small program with a few containers and generics
# and a ~500-line one (tests/integration/lib/bigprog.mjs, needs node).
# Prints per program the median of N runs of
#   run   wall time of sandbox.command inside the container (compile + run)
#   cpu   CPU time the container used for it
#   peak  the container's peak memory (cgroup v1 max_usage_in_bytes, which
#         includes the files in the /tmp tmpfs)
#   total wall time of the whole `docker run` (container start included)
# Figures, never a verdict: see docs/runners.md for the ones measured there.
#
# Usage: runners/compile-cost.sh [-n RUNS] [-m MB] [LANG...]   (default: 5
#        runs, 256 MB; c cpp go rust ruby php). -m runs under another memory
#        limit: the least that works is what a compiler really needs.
set -Eeuo pipefail

N=5 MB=256
while [[ "${1:-}" == -n || "${1:-}" == -m ]]; do
  case "$1" in
    -n) N="${2:?-n needs a number}" ;;
    -m) MB="${2:?-m needs a number of MB}" ;;
  esac
  shift 2
done
[[ "$N" =~ ^[1-9][0-9]*$ && "$MB" =~ ^[1-9][0-9]*$ ]] || {
  echo "compile-cost.sh: -n and -m take positive numbers (runs, MB), not '$N', '$MB'" >&2
  exit 2
}
LANGS=("$@")
((${#LANGS[@]})) || LANGS=(c cpp go rust ruby php)
PREFIX="${RUNNER_IMAGE_PREFIX:-mcp-sandboxd/runner-}"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/mcp-sandboxd-cost.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# hello/<lang> and small/<lang>: the programs, written as the image's filename.
mkdir -p "$tmp/hello" "$tmp/small"
cat >"$tmp/hello/c" <<'EOF'
#include <stdio.h>
int main(void) { puts("hello"); return 0; }
EOF
cat >"$tmp/hello/cpp" <<'EOF'
#include <iostream>
int main() { std::cout << "hello" << std::endl; }
EOF
cat >"$tmp/hello/go" <<'EOF'
package main

import "fmt"

func main() { fmt.Println("hello") }
EOF
cat >"$tmp/hello/rust" <<'EOF'
fn main() { println!("hello"); }
EOF
printf 'puts "hello"\n' >"$tmp/hello/ruby"
printf '<?php\necho "hello\\n";\n' >"$tmp/hello/php"
cat >"$tmp/small/c" <<'EOF'
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct item { char name[16]; double v; };
static int cmp(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	return (x->v > y->v) - (x->v < y->v);
}
int main(void)
{
	struct item it[100];
	for (int i = 0; i < 100; i++) {
		snprintf(it[i].name, sizeof(it[i].name), "item%d", i);
		it[i].v = sin(i) * 100;
	}
	qsort(it, 100, sizeof(it[0]), cmp);
	long primes = 0;
	for (long n = 2; n < 200000; n++) {
		int p = 1;
		for (long q = 2; q * q <= n; q++)
			if (n % q == 0) { p = 0; break; }
		primes += p;
	}
	printf("%s %.2f %ld\n", it[0].name, it[0].v, primes);
	return 0;
}
EOF
cat >"$tmp/small/cpp" <<'EOF'
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>
struct Shape { virtual ~Shape() = default; virtual double area() const = 0; virtual std::string name() const = 0; };
struct Circle : Shape { double r; explicit Circle(double r) : r(r) {} double area() const override { return 3.14159 * r * r; } std::string name() const override { return "circle"; } };
struct Rect : Shape { double w, h; Rect(double w, double h) : w(w), h(h) {} double area() const override { return w * h; } std::string name() const override { return "rect"; } };
template <typename T> T sum(const std::vector<T> &v) { return std::accumulate(v.begin(), v.end(), T{}); }
int main()
{
	std::vector<std::unique_ptr<Shape>> shapes;
	for (int i = 1; i <= 10; i++) {
		if (i % 2) shapes.push_back(std::make_unique<Circle>(i));
		else shapes.push_back(std::make_unique<Rect>(i, i + 1));
	}
	std::map<std::string, double> by_name;
	for (auto &s : shapes) by_name[s->name()] += s->area();
	for (auto &[k, v] : by_name) std::cout << k << ": " << v << "\n";
	std::unordered_map<std::string, int> wc;
	std::istringstream in("the quick brown fox jumps over the lazy dog the end");
	std::string w;
	while (in >> w) wc[w]++;
	std::vector<std::pair<std::string, int>> items(wc.begin(), wc.end());
	std::sort(items.begin(), items.end(), [](auto &a, auto &b) { return a.second > b.second || (a.second == b.second && a.first < b.first); });
	for (auto &[k, v] : items) std::cout << k << " " << v << "\n";
	std::vector<long long> primes;
	for (long long n = 2; primes.size() < 1000; n++) {
		bool p = true;
		for (auto q : primes) { if (q * q > n) break; if (n % q == 0) { p = false; break; } }
		if (p) primes.push_back(n);
	}
	std::cout << "sum of first 1000 primes: " << sum(primes) << "\n";
	std::function<long long(int)> fib = [&](int n) -> long long { return n < 2 ? n : fib(n - 1) + fib(n - 2); };
	std::cout << "fib(30)=" << fib(30) << "\n";
}
EOF
cat >"$tmp/small/go" <<'EOF'
package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
)

type Shape interface {
	Area() float64
	Name() string
}
type Circle struct{ R float64 }
type Rect struct{ W, H float64 }

func (c Circle) Area() float64 { return math.Pi * c.R * c.R }
func (c Circle) Name() string   { return "circle" }
func (r Rect) Area() float64    { return r.W * r.H }
func (r Rect) Name() string     { return "rect" }

func fib(n int) int {
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}

func main() {
	var shapes []Shape
	for i := 1; i <= 10; i++ {
		if i%2 == 1 {
			shapes = append(shapes, Circle{float64(i)})
		} else {
			shapes = append(shapes, Rect{float64(i), float64(i + 1)})
		}
	}
	byName := map[string]float64{}
	for _, s := range shapes {
		byName[s.Name()] += s.Area()
	}
	b, _ := json.Marshal(byName)
	fmt.Println(string(b))
	wc := map[string]int{}
	for _, w := range strings.Fields("the quick brown fox jumps over the lazy dog the end") {
		wc[w]++
	}
	keys := make([]string, 0, len(wc))
	for k := range wc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Println(keys, fib(30))
	rec := httptest.NewRecorder()
	http.NotFound(rec, httptest.NewRequest("GET", "/", nil))
	fmt.Println(rec.Code)
}
EOF
cat >"$tmp/small/rust" <<'EOF'
use std::collections::HashMap;
use std::fmt;

trait Shape { fn area(&self) -> f64; fn name(&self) -> &'static str; }
struct Circle { r: f64 }
struct Rect { w: f64, h: f64 }
impl Shape for Circle { fn area(&self) -> f64 { 3.14159 * self.r * self.r } fn name(&self) -> &'static str { "circle" } }
impl Shape for Rect { fn area(&self) -> f64 { self.w * self.h } fn name(&self) -> &'static str { "rect" } }

#[derive(Debug, Clone, PartialEq)]
struct Point { x: i64, y: i64 }
impl fmt::Display for Point { fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result { write!(f, "({}, {})", self.x, self.y) } }

fn fib(n: u64) -> u64 { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }

fn main() {
    let shapes: Vec<Box<dyn Shape>> = (1..=10).map(|i| -> Box<dyn Shape> { if i % 2 == 1 { Box::new(Circle { r: i as f64 }) } else { Box::new(Rect { w: i as f64, h: (i + 1) as f64 }) } }).collect();
    let mut by_name: HashMap<&str, f64> = HashMap::new();
    for s in &shapes { *by_name.entry(s.name()).or_insert(0.0) += s.area(); }
    let mut keys: Vec<_> = by_name.iter().collect();
    keys.sort_by(|a, b| a.0.cmp(b.0));
    for (k, v) in keys { println!("{}: {:.2}", k, v); }
    let mut wc: HashMap<String, usize> = HashMap::new();
    for w in "the quick brown fox jumps over the lazy dog the end".split_whitespace() { *wc.entry(w.to_string()).or_default() += 1; }
    let mut items: Vec<(String, usize)> = wc.into_iter().collect();
    items.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (k, v) in &items { println!("{} {}", k, v); }
    let mut primes: Vec<u64> = Vec::new();
    let mut n = 2u64;
    while primes.len() < 1000 { if primes.iter().take_while(|&&q| q * q <= n).all(|&q| n % q != 0) { primes.push(n); } n += 1; }
    println!("sum of first 1000 primes: {}", primes.iter().sum::<u64>());
    let pts: Vec<Point> = (0..5).map(|i| Point { x: i, y: i * i }).collect();
    println!("{}", pts.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(" "));
    println!("fib(30)={}", fib(30));
}
EOF

# big/<lang>: the ~500-line program the integration test compiles.
mkdir -p "$tmp/big"
if command -v node >/dev/null 2>&1; then
  for lang in c cpp go rust; do
    node "$(dirname "${BASH_SOURCE[0]}")/../tests/integration/lib/bigprog.mjs" "$lang" >"$tmp/big/$lang"
  done
fi

label_of() { docker image inspect -f "{{index .Config.Labels \"$2\"}}" "$1"; }
now_ms() { date +%s%3N; }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

# One run: prints "run_ms cpu_ms peak_mb total_ms", or fails.
one_run() {
  local image="$1" dir="$2" t0 out
  t0=$(now_ms)
  # The wrapper reads the clock and the container's own cgroup around the
  # image's command, given as "$@" (exactly the sandbox.command argv).
  # shellcheck disable=SC2016 # expanded inside the container
  out="$(docker run --rm --network none --read-only --tmpfs /tmp:rw,exec,size=64m \
    --user 64321:64321 -e HOME=/tmp --cap-drop ALL --security-opt no-new-privileges \
    --memory "${MB}m" --memory-swap "${MB}m" --cpus 0.5 --pids-limit 128 --init \
    --mount "type=bind,src=$dir,dst=/sandbox,readonly" --tmpfs /data:rw,size=8m,uid=64321 \
    --entrypoint sh "$image" -c '
      c0=$(cat /sys/fs/cgroup/cpuacct/cpuacct.usage); s=$(date +%s%N)
      "$@" >/dev/null </dev/null || { echo "command failed (exit $?): $*" >&2; exit 1; }
      e=$(date +%s%N); c1=$(cat /sys/fs/cgroup/cpuacct/cpuacct.usage)
      echo $(((e - s) / 1000000)) $(((c1 - c0) / 1000000)) \
        $(($(cat /sys/fs/cgroup/memory/memory.max_usage_in_bytes) / 1048576))' \
    sh "${CMD[@]}")" || return 1
  echo "$out $(($(now_ms) - t0))"
}

printf '%-6s %-6s %8s %8s %8s %9s  (median of %d, --cpus 0.5 --memory %sm; load %s)\n' \
  LANG PROG RUN_MS CPU_MS PEAK_MB TOTAL_MS "$N" "$MB" "$(cut -d' ' -f1-3 /proc/loadavg)"
for lang in "${LANGS[@]}"; do
  image="$PREFIX$lang:latest"
  docker image inspect "$image" >/dev/null 2>&1 || {
    echo "$lang: $image is not built" >&2
    continue
  }
  filename="$(label_of "$image" sandbox.filename)"
  # sandbox.command is a JSON array of plain strings (build.sh checks that).
  mapfile -t CMD < <(label_of "$image" sandbox.command |
    python3 -c 'import json, sys; print("\n".join(json.load(sys.stdin)))')
  for prog in hello small big; do
    [[ -f "$tmp/$prog/$lang" ]] || continue
    dir="$tmp/run-$lang-$prog"
    mkdir -p "$dir"
    cp "$tmp/$prog/$lang" "$dir/$filename"
    chmod -R a+rX "$dir"
    : >"$tmp/results"
    fails=0
    for ((i = 0; i < N; i++)); do one_run "$image" "$dir" >>"$tmp/results" || fails=$((fails + 1)); done
    if ((fails)); then
      # At a low -m this is the answer: the compiler needs more.
      printf '%-6s %-6s failed %d of %d runs at %s MB (killed for memory or a compiler error)\n' \
        "$lang" "$prog" "$fails" "$N" "$MB"
      continue
    fi
    printf '%-6s %-6s %8s %8s %8s %9s\n' "$lang" "$prog" \
      "$(cut -d' ' -f1 "$tmp/results" | median)" "$(cut -d' ' -f2 "$tmp/results" | median)" \
      "$(cut -d' ' -f3 "$tmp/results" | sort -n | tail -n 1)" "$(cut -d' ' -f4 "$tmp/results" | median)"
  done
done
