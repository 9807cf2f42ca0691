// SPDX-License-Identifier: MIT
// Generates a program of about 500 lines in C, C++, Go or Rust, the size of
// what a model writes for a real task: many types with methods, an interface
// (trait, virtual base, function pointers), generic code, maps, vectors,
// closures and formatting. It prints one checksum line, computed here the
// same way, so a test knows what a correct compile and run prints. Used by
// languages.test.mjs (compiled languages within their memory, issue 23) and
// by runners/compile-cost.sh (`node tests/integration/lib/bigprog.mjs LANG`
// prints the program). Pure: no state, no I/O but that command line.
import { fileURLToPath } from 'node:url';

/** Units of each program: one type (or struct) with its methods per unit. */
export const UNITS = 28;

// What unit i computes: values v*i for v in 0..(i%7+3), score = the sum of
// (value % 97 + i) plus the length of the name "item<i>".
function expectedScore(i) {
  let s = 0;
  for (let v = 0; v < (i % 7) + 3; v++) s += ((v * i) % 97) + i;
  return s + `item${i}`.length;
}

/** The checksum line every program prints. */
export function expectedOutput(units = UNITS) {
  let total = 0;
  let best = 0;
  let bestName = '';
  for (let i = 0; i < units; i++) {
    const s = expectedScore(i);
    total += s;
    if (s > best) {
      best = s;
      bestName = `item${i}`;
    }
  }
  // Groups by i % 3, summed: the map part of each program.
  const groups = [0, 0, 0];
  for (let i = 0; i < units; i++) groups[i % 3] += expectedScore(i);
  return `units=${units} total=${total} best=${bestName}:${best} groups=${groups.join(',')}\n`;
}

function rust(units) {
  const out = [
    'use std::collections::HashMap;',
    'use std::fmt;',
    '',
    'trait Scored {',
    '    fn score(&self) -> i64;',
    '    fn name(&self) -> String;',
    '}',
    '',
  ];
  for (let i = 0; i < units; i++) {
    out.push(
      '#[derive(Debug, Clone, PartialEq)]',
      `struct Item${i} {`,
      '    name: String,',
      '    values: Vec<i64>,',
      '}',
      '',
      `impl Item${i} {`,
      '    fn new() -> Self {',
      `        Self { name: format!("item{}", ${i}), values: (0..${(i % 7) + 3}).map(|v| v * ${i}).collect() }`,
      '    }',
      '}',
      '',
      `impl Scored for Item${i} {`,
      `    fn score(&self) -> i64 { self.values.iter().map(|v| v % 97 + ${i}).sum::<i64>() + self.name.len() as i64 }`,
      '    fn name(&self) -> String { self.name.clone() }',
      '}',
      '',
    );
  }
  out.push(
    'struct Report { total: i64, best: (String, i64), groups: Vec<i64> }',
    '',
    'impl fmt::Display for Report {',
    '    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {',
    '        let g: Vec<String> = self.groups.iter().map(|x| x.to_string()).collect();',
    '        write!(f, "units={} total={} best={}:{} groups={}", UNITS, self.total, self.best.0, self.best.1, g.join(","))',
    '    }',
    '}',
    '',
    `const UNITS: usize = ${units};`,
    '',
    'fn best_of<T: Scored + ?Sized>(items: &[Box<T>]) -> Option<(String, i64)> {',
    '    items.iter().fold(None, |acc: Option<(String, i64)>, it| match acc {',
    '        Some((n, s)) if s >= it.score() => Some((n, s)),',
    '        _ => Some((it.name(), it.score())),',
    '    })',
    '}',
    '',
    'fn main() {',
    '    let items: Vec<Box<dyn Scored>> = vec![',
  );
  for (let i = 0; i < units; i++) out.push(`        Box::new(Item${i}::new()),`);
  out.push(
    '    ];',
    '    let total: i64 = items.iter().map(|it| it.score()).sum();',
    '    let mut groups: HashMap<usize, i64> = HashMap::new();',
    '    for (i, it) in items.iter().enumerate() {',
    '        *groups.entry(i % 3).or_insert(0) += it.score();',
    '    }',
    '    let mut keys: Vec<_> = groups.keys().copied().collect();',
    '    keys.sort();',
    '    let report = Report { total, best: best_of(&items).unwrap(), groups: keys.iter().map(|k| groups[k]).collect() };',
    '    println!("{}", report);',
    '}',
  );
  return out.join('\n') + '\n';
}

function cpp(units) {
  const out = [
    '#include <algorithm>',
    '#include <iostream>',
    '#include <map>',
    '#include <memory>',
    '#include <numeric>',
    '#include <sstream>',
    '#include <string>',
    '#include <vector>',
    '',
    'struct Scored {',
    '\tvirtual ~Scored() = default;',
    '\tvirtual long score() const = 0;',
    '\tvirtual std::string name() const = 0;',
    '};',
    '',
  ];
  for (let i = 0; i < units; i++) {
    out.push(
      `class Item${i} : public Scored {`,
      '\tstd::string name_;',
      '\tstd::vector<long> values_;',
      'public:',
      `\tItem${i}() : name_("item" + std::to_string(${i}))`,
      '\t{',
      `\t\tfor (long v = 0; v < ${(i % 7) + 3}; v++) values_.push_back(v * ${i});`,
      '\t}',
      '\tlong score() const override',
      '\t{',
      `\t\treturn std::accumulate(values_.begin(), values_.end(), 0L, [](long a, long v) { return a + v % 97 + ${i}; }) + (long)name_.size();`,
      '\t}',
      '\tstd::string name() const override { return name_; }',
      '};',
      '',
    );
  }
  out.push(
    'template <typename It> std::pair<std::string, long> best_of(It first, It last)',
    '{',
    '\tstd::pair<std::string, long> best{"", 0};',
    '\tfor (; first != last; ++first)',
    '\t\tif ((*first)->score() > best.second) best = {(*first)->name(), (*first)->score()};',
    '\treturn best;',
    '}',
    '',
    'int main()',
    '{',
    '\tstd::vector<std::unique_ptr<Scored>> items;',
  );
  for (let i = 0; i < units; i++) out.push(`\titems.push_back(std::make_unique<Item${i}>());`);
  out.push(
    '\tlong total = 0;',
    '\tstd::map<int, long> groups;',
    '\tfor (std::size_t i = 0; i < items.size(); i++) {',
    '\t\ttotal += items[i]->score();',
    '\t\tgroups[i % 3] += items[i]->score();',
    '\t}',
    '\tauto best = best_of(items.begin(), items.end());',
    '\tstd::ostringstream g;',
    '\tfor (auto it = groups.begin(); it != groups.end(); ++it) g << (it == groups.begin() ? "" : ",") << it->second;',
    `\tstd::cout << "units=" << ${units} << " total=" << total << " best=" << best.first << ":" << best.second << " groups=" << g.str() << "\\n";`,
    '}',
  );
  return out.join('\n') + '\n';
}

function go(units) {
  const out = [
    'package main',
    '',
    'import (',
    '\t"fmt"',
    '\t"sort"',
    '\t"strings"',
    ')',
    '',
    'type Scored interface {',
    '\tScore() int64',
    '\tName() string',
    '}',
    '',
  ];
  for (let i = 0; i < units; i++) {
    out.push(
      `type Item${i} struct {`,
      '\tname   string',
      '\tvalues []int64',
      '}',
      '',
      `func NewItem${i}() *Item${i} {`,
      `\tit := &Item${i}{name: fmt.Sprintf("item%d", ${i})}`,
      `\tfor v := int64(0); v < ${(i % 7) + 3}; v++ {`,
      `\t\tit.values = append(it.values, v*${i})`,
      '\t}',
      '\treturn it',
      '}',
      '',
      `func (it *Item${i}) Score() int64 { return sumBy(it.values, func(v int64) int64 { return v%97 + ${i} }) + int64(len(it.name)) }`,
      `func (it *Item${i}) Name() string  { return it.name }`,
      '',
    );
  }
  out.push(
    'func sumBy[T any, N int64 | float64](xs []T, f func(T) N) N {',
    '\tvar s N',
    '\tfor _, x := range xs {',
    '\t\ts += f(x)',
    '\t}',
    '\treturn s',
    '}',
    '',
    'func main() {',
    '\titems := []Scored{',
  );
  for (let i = 0; i < units; i++) out.push(`\t\tNewItem${i}(),`);
  out.push(
    '\t}',
    '\ttotal := sumBy(items, func(s Scored) int64 { return s.Score() })',
    '\tgroups := map[int]int64{}',
    '\tbestName, best := "", int64(0)',
    '\tfor i, it := range items {',
    '\t\tgroups[i%3] += it.Score()',
    '\t\tif it.Score() > best {',
    '\t\t\tbestName, best = it.Name(), it.Score()',
    '\t\t}',
    '\t}',
    '\tkeys := make([]int, 0, len(groups))',
    '\tfor k := range groups {',
    '\t\tkeys = append(keys, k)',
    '\t}',
    '\tsort.Ints(keys)',
    '\tparts := make([]string, 0, len(keys))',
    '\tfor _, k := range keys {',
    '\t\tparts = append(parts, fmt.Sprint(groups[k]))',
    '\t}',
    `\tfmt.Printf("units=%d total=%d best=%s:%d groups=%s\\n", ${units}, total, bestName, best, strings.Join(parts, ","))`,
    '}',
  );
  return out.join('\n') + '\n';
}

function c(units) {
  const out = [
    '#include <stdio.h>',
    '#include <stdlib.h>',
    '#include <string.h>',
    '',
    'struct item {',
    '\tchar name[32];',
    '\tlong values[16];',
    '\tint n;',
    '\tlong (*score)(const struct item *);',
    '};',
    '',
  ];
  for (let i = 0; i < units; i++) {
    out.push(
      `static long score${i}(const struct item *it)`,
      '{',
      '\tlong s = 0;',
      '\tfor (int k = 0; k < it->n; k++)',
      `\t\ts += it->values[k] % 97 + ${i};`,
      '\treturn s + (long)strlen(it->name);',
      '}',
      '',
      `static void init${i}(struct item *it)`,
      '{',
      `\tsnprintf(it->name, sizeof(it->name), "item%d", ${i});`,
      `\tit->n = ${(i % 7) + 3};`,
      '\tfor (int v = 0; v < it->n; v++)',
      `\t\tit->values[v] = (long)v * ${i};`,
      `\tit->score = score${i};`,
      '}',
      '',
    );
  }
  out.push('static void (*const inits[])(struct item *) = {');
  for (let i = 0; i < units; i++) out.push(`\tinit${i},`);
  out.push(
    '};',
    '',
    'int main(void)',
    '{',
    `\tenum { UNITS = ${units} };`,
    '\tstruct item *items = calloc(UNITS, sizeof(*items));',
    '\tlong total = 0, best = 0, groups[3] = {0, 0, 0};',
    '\tconst char *best_name = "";',
    '\tif (!items) return 1;',
    '\tfor (int i = 0; i < UNITS; i++) {',
    '\t\tinits[i](&items[i]);',
    '\t\tlong s = items[i].score(&items[i]);',
    '\t\ttotal += s;',
    '\t\tgroups[i % 3] += s;',
    '\t\tif (s > best) { best = s; best_name = items[i].name; }',
    '\t}',
    '\tprintf("units=%d total=%ld best=%s:%ld groups=%ld,%ld,%ld\\n", UNITS, total, best_name, best, groups[0], groups[1], groups[2]);',
    '\tfree(items);',
    '\treturn 0;',
    '}',
  );
  return out.join('\n') + '\n';
}

const GENERATORS = { c, cpp, go, rust };

/** { code, expected, lines } of the program for lang (c, cpp, go, rust). */
export function bigProgram(lang, units = UNITS) {
  const gen = GENERATORS[lang];
  if (!gen) throw new Error(`no 500-line program generator for ${lang} (have: ${Object.keys(GENERATORS).join(', ')})`);
  const code = gen(units);
  return { code, expected: expectedOutput(units), lines: code.split('\n').length - 1 };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const lang = process.argv[2];
  if (!GENERATORS[lang]) {
    process.stderr.write(`usage: node bigprog.mjs ${Object.keys(GENERATORS).join('|')} [UNITS]: prints a ~500-line program\n`);
    process.exit(2);
  }
  process.stdout.write(bigProgram(lang, process.argv[3] ? Number(process.argv[3]) : UNITS).code);
}
