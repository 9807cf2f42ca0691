// build.sh smoke test: run as /sandbox/main.rs through sandbox.command.
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::sync::{Arc, Mutex};
use std::thread;

fn main() {
    let total = Arc::new(Mutex::new(0u64));
    let handles: Vec<_> = (1..=10u64)
        .map(|i| {
            let total = Arc::clone(&total);
            thread::spawn(move || *total.lock().unwrap() += i * i)
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let total = *total.lock().unwrap();
    assert_eq!(total, 385);
    let mut words: HashMap<&str, usize> = HashMap::new();
    for w in "a b a c b a".split_whitespace() {
        *words.entry(w).or_default() += 1;
    }
    let sorted: BTreeMap<_, _> = words.into_iter().collect();
    fs::write("/data/smoke.txt", format!("{total} {sorted:?}\n")).unwrap();
    let back = fs::read_to_string("/data/smoke.txt").unwrap();
    assert!(back.starts_with("385 {\"a\": 3"), "{back}");
    println!("cwd {}", std::env::current_dir().unwrap().display());
    println!("smoke ok");
}
