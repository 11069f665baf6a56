//! Property test: random sequences of `add`, `get` and `done` against a model written from the
//! spec of client-go's `util/workqueue/queue.go`: FIFO order, de-duplication of waiting items, dirty
//! items re-queued by `done`, and never an item handed out while it is being processed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::collections::{HashSet, VecDeque};

use hpa_workqueue::Queue;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add(u8),
    Get,
    /// Done for the n-th (modulo) item being processed.
    Done(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..6).prop_map(Op::Add),
        2 => Just(Op::Get),
        2 => any::<usize>().prop_map(Op::Done),
    ]
}

#[derive(Default)]
struct Model {
    queue: VecDeque<u8>,
    dirty: HashSet<u8>,
    processing: Vec<u8>,
}

proptest! {
    #[test]
    fn queue_matches_the_model(ops in proptest::collection::vec(op(), 1..200)) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let q = Queue::new();
        let mut m = Model::default();
        for op in ops {
            match op {
                Op::Add(k) => {
                    q.add(k);
                    if m.dirty.insert(k) && !m.processing.contains(&k) {
                        m.queue.push_back(k);
                    }
                }
                Op::Get => {
                    // An empty queue would make get wait: only get when the model has an item.
                    if let Some(expected) = m.queue.pop_front() {
                        let got = rt.block_on(q.get()).unwrap();
                        prop_assert_eq!(got, expected);
                        prop_assert!(!m.processing.contains(&got), "handed out twice at once");
                        m.processing.push(got);
                        m.dirty.remove(&got);
                    }
                }
                Op::Done(n) => {
                    if !m.processing.is_empty() {
                        let k = m.processing.remove(n % m.processing.len());
                        q.done(&k);
                        if m.dirty.contains(&k) {
                            m.queue.push_back(k);
                        }
                    }
                }
            }
            prop_assert_eq!(q.len(), m.queue.len());
        }
        // Shut down: the queued items are still handed out, in order, then None.
        q.shut_down();
        for expected in m.queue {
            prop_assert_eq!(rt.block_on(q.get()), Some(expected));
        }
        prop_assert_eq!(rt.block_on(q.get()), None);
    }
}
