//! The prefix cache: prompts' keys and values, kept so that a later prompt that starts with the
//! same tokens (a system prompt, a chat history, few-shot examples) copies them into its row
//! instead of running them through the program again.
//!
//! A radix tree of token blocks (TGI's `radix.rs`; vLLM's hashed full blocks): each node holds a
//! span of whole blocks of `BLOCK` tokens and their keys and values, its children the spans that
//! follow it (no two children share their first block), so prompts that share a start store it
//! once: ten chats over one system prompt hold it once, each chat's own turns below it.
//!
//! Exact by construction: a causal model's keys and values at position i depend on tokens
//! `0..=i` only, so the slots of a shared prefix are the ones the prompt's own prefill would
//! write (up to the last bits a matrix kernel's blocking may change with the number of rows).
//! At least the prompt's last token always runs (its logits choose the first new token).
//! Bounded: the nodes hold at most `max_tokens` tokens in all; the least recently used leaf that
//! no prompt holds (reference count 0) goes first. A restored path is held until its prompt's
//! own span is inserted below it, so making room for a span never drops the path it extends.
use anyhow::Result;
use tch::Tensor;

/// Tokens per block: spans are stored and split in whole blocks (a prompt's last partial block
/// runs again), so a node's tensors are few and large, as vLLM's blocks are.
pub const BLOCK: usize = 16;

/// What the prefix cache holds and has done.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PrefixStats {
    pub max_tokens: usize,
    /// Tokens held, in all spans (each shared span once).
    pub tokens: usize,
    /// Spans held (the tree's nodes).
    pub entries: usize,
    /// Prompts looked up, and their tokens.
    pub queries: u64,
    pub queried_tokens: u64,
    /// Prompts that reused a prefix, and the tokens they did not run.
    pub hits: u64,
    pub reused_tokens: u64,
    /// Spans dropped to stay within `max_tokens`.
    pub evictions: u64,
}

struct Node {
    /// The span's tokens (whole blocks; empty for the root).
    tokens: Vec<u32>,
    /// One tensor `[1, Hkv, n, D]` per cache tensor of the batch (n = the span's tokens).
    kv: Vec<Tensor>,
    parent: usize,
    children: Vec<usize>,
    /// Prompts holding it (restored, not yet inserted): never evicted while > 0.
    refs: usize,
    /// When it was last used (a counter).
    used: u64,
}

/// A restored path, held until `insert` or `release`: its nodes' ids, root excluded.
#[must_use]
#[derive(Debug, Default)]
pub struct Hold(Vec<usize>);

const ROOT: usize = 0;

pub struct PrefixCache {
    /// Nodes by id (a slot map: freed ids are reused); `ROOT` is the empty span.
    nodes: Vec<Option<Node>>,
    free: Vec<usize>,
    clock: u64,
    held: usize,
    stats: PrefixStats,
}

fn common(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn copy_of(t: &Tensor) -> Result<Tensor> {
    let mut copy = Tensor::f_empty(t.size(), (t.kind(), t.device()))?;
    copy.f_copy_(t)?;
    Ok(copy)
}

impl PrefixCache {
    pub fn new(max_tokens: usize) -> PrefixCache {
        let root = Node {
            tokens: Vec::new(),
            kv: Vec::new(),
            parent: ROOT,
            children: Vec::new(),
            refs: 0,
            used: 0,
        };
        PrefixCache {
            nodes: vec![Some(root)],
            free: Vec::new(),
            clock: 0,
            held: 0,
            stats: PrefixStats {
                max_tokens,
                ..PrefixStats::default()
            },
        }
    }

    pub fn stats(&self) -> PrefixStats {
        PrefixStats {
            tokens: self.held,
            entries: self.nodes.len() - self.free.len() - 1,
            ..self.stats
        }
    }

    fn node(&self, id: usize) -> &Node {
        self.nodes[id].as_ref().expect("a live node")
    }

    fn node_mut(&mut self, id: usize) -> &mut Node {
        self.nodes[id].as_mut().expect("a live node")
    }

    /// The child of `id` sharing the most tokens with `rest`, and how many.
    fn best_child(&self, id: usize, rest: &[u32]) -> Option<(usize, usize)> {
        (self.node(id).children.iter())
            .map(|&c| (c, common(&self.node(c).tokens, rest)))
            .filter(|&(_, n)| n > 0)
            .max_by_key(|&(_, n)| n)
    }

    /// Copies the longest cached prefix of `prompt` (at most all its tokens but the last) into
    /// slots `0..n` of `row` (the row's views of the batch's cache tensors); returns n and the
    /// path, held until `insert` or `release`.
    pub fn restore(&mut self, prompt: &[u32], row: &[Tensor]) -> Result<(usize, Hold)> {
        self.clock += 1;
        self.stats.queries += 1;
        self.stats.queried_tokens += prompt.len() as u64;
        let most = prompt.len().saturating_sub(1);
        let (mut at, mut id, mut path) = (0, ROOT, Vec::new());
        while at < most {
            let Some((child, n)) = self.best_child(id, &prompt[at..]) else {
                break;
            };
            let n = n.min(most - at);
            for (dst, src) in row.iter().zip(&self.node(child).kv) {
                dst.f_narrow(2, at as i64, n as i64)?
                    .f_copy_(&src.f_narrow(2, 0, n as i64)?)?;
            }
            path.push(child);
            at += n;
            if n < self.node(child).tokens.len() {
                break;
            }
            id = child;
        }
        let clock = self.clock;
        for &p in &path {
            let node = self.node_mut(p);
            node.refs += 1;
            node.used = clock;
        }
        if at > 0 {
            self.stats.hits += 1;
            self.stats.reused_tokens += at as u64;
        }
        Ok((at, Hold(path)))
    }

    /// Lets go of a restored path whose prompt did not run.
    pub fn release(&mut self, hold: Hold) {
        for id in hold.0 {
            self.node_mut(id).refs -= 1;
        }
    }

    /// Keeps `prompt`'s keys and values, slots `0..prompt.len()` of `row` (after its prefill):
    /// its whole blocks not held yet become a span below the longest held path (splitting a span
    /// where the prompt leaves it), least recently used leaves going to make room.
    pub fn insert(&mut self, prompt: &[u32], row: &[Tensor], hold: Hold) -> Result<()> {
        let done = self.insert_held(prompt, row);
        self.release(hold);
        done
    }

    fn insert_held(&mut self, prompt: &[u32], row: &[Tensor]) -> Result<()> {
        self.clock += 1;
        let clock = self.clock;
        let whole = prompt.len() / BLOCK * BLOCK;
        // The path it shares, held while room is made below it.
        let (mut at, mut id, mut path) = (0, ROOT, Vec::new());
        while at < whole {
            let Some((child, n)) = self.best_child(id, &prompt[at..whole]) else {
                break;
            };
            let n = n / BLOCK * BLOCK;
            if n == 0 {
                break;
            }
            if n < self.node(child).tokens.len() {
                self.split(child, n)?;
            }
            self.node_mut(child).used = clock;
            self.node_mut(child).refs += 1;
            path.push(child);
            at += n;
            id = child;
        }
        let made = self.add_leaf(id, &prompt[at..whole], at, row, clock);
        for p in path {
            self.node_mut(p).refs -= 1;
        }
        made
    }

    /// Adds `tokens` (slots `at..` of `row`) below `parent`, within the bound: what does not
    /// fit once the unheld leaves are gone is not kept (whole blocks of it may be).
    fn add_leaf(
        &mut self,
        parent: usize,
        tokens: &[u32],
        at: usize,
        row: &[Tensor],
        clock: u64,
    ) -> Result<()> {
        let max = self.stats.max_tokens;
        while self.held + tokens.len() > max && self.evict_one(parent) {}
        let room = max.saturating_sub(self.held).min(tokens.len()) / BLOCK * BLOCK;
        if room == 0 {
            return Ok(());
        }
        let kv = (row.iter())
            .map(|t| copy_of(&t.f_narrow(2, at as i64, room as i64)?))
            .collect::<Result<Vec<_>>>()?;
        let node = Node {
            tokens: tokens[..room].to_vec(),
            kv,
            parent,
            children: Vec::new(),
            refs: 0,
            used: clock,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id] = Some(node);
                id
            }
            None => {
                self.nodes.push(Some(node));
                self.nodes.len() - 1
            }
        };
        self.node_mut(parent).children.push(id);
        self.held += room;
        Ok(())
    }

    /// Splits node `id` after its first `n` tokens (whole blocks): `id` keeps them (its ids in
    /// holds stay right), a new child below it the rest and the old children.
    fn split(&mut self, id: usize, n: usize) -> Result<()> {
        let node = self.node_mut(id);
        let rest_tokens = node.tokens.split_off(n);
        let len = rest_tokens.len() as i64;
        let (head, rest): (Vec<Tensor>, Vec<Tensor>) = (node.kv.iter())
            .map(|t| {
                let head = copy_of(&t.f_narrow(2, 0, n as i64)?)?;
                Ok::<_, anyhow::Error>((head, copy_of(&t.f_narrow(2, n as i64, len)?)?))
            })
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .unzip();
        let children = std::mem::take(&mut node.children);
        node.kv = head;
        let lower = Node {
            tokens: rest_tokens,
            kv: rest,
            parent: id,
            children,
            refs: 0,
            used: node.used,
        };
        let lower_id = self.free.pop().unwrap_or(self.nodes.len());
        if lower_id == self.nodes.len() {
            self.nodes.push(Some(lower));
        } else {
            self.nodes[lower_id] = Some(lower);
        }
        for c in self.node(lower_id).children.clone() {
            self.node_mut(c).parent = lower_id;
        }
        self.node_mut(id).children.push(lower_id);
        Ok(())
    }

    /// Drops the least recently used leaf no prompt holds (never `keep`); false when none is.
    fn evict_one(&mut self, keep: usize) -> bool {
        let leaf = (1..self.nodes.len())
            .filter(|&i| i != keep)
            .filter_map(|i| self.nodes[i].as_ref().map(|n| (i, n)))
            .filter(|(_, n)| n.children.is_empty() && n.refs == 0)
            .min_by_key(|(_, n)| n.used)
            .map(|(i, _)| i);
        let Some(leaf) = leaf else {
            return false;
        };
        let node = self.nodes[leaf].take().expect("a live node");
        self.free.push(leaf);
        self.held -= node.tokens.len();
        self.node_mut(node.parent).children.retain(|&c| c != leaf);
        self.stats.evictions += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row of one cache tensor `[1, 1, C, 1]` whose slot i holds `value(i)`.
    fn row(capacity: i64, value: impl Fn(i64) -> f32) -> Vec<Tensor> {
        let v: Vec<f32> = (0..capacity).map(value).collect();
        vec![Tensor::f_from_slice(&v)
            .unwrap()
            .f_view([1, 1, capacity, 1])
            .unwrap()]
    }

    fn slots(t: &Tensor) -> Vec<f32> {
        Vec::<f32>::try_from(t.f_view([-1]).unwrap()).unwrap()
    }

    /// `n` tokens starting at `first`.
    fn toks(first: u32, n: usize) -> Vec<u32> {
        (first..first + n as u32).collect()
    }

    /// Restores then inserts `prompt` as `Batch::admit` does, its row's slot i holding `base + i`;
    /// returns the tokens restored and the row.
    fn admit(c: &mut PrefixCache, prompt: &[u32], base: f32) -> (usize, Vec<f32>) {
        let target = row(prompt.len() as i64 + 1, |_| -1.0);
        let (n, hold) = c.restore(prompt, &target).unwrap();
        let restored = slots(&target[0]);
        let prefill = row(prompt.len() as i64 + 1, |i| base + i as f32);
        c.insert(prompt, &prefill, hold).unwrap();
        (n, restored)
    }

    #[test]
    fn a_shared_start_is_held_once_and_restored_up_to_all_but_the_last_token() {
        let mut c = PrefixCache::new(1000);
        let system = toks(1, 3 * BLOCK);
        let a = [system.clone(), toks(100, BLOCK + 3)].concat();
        let b = [system.clone(), toks(200, 2 * BLOCK)].concat();
        assert_eq!(admit(&mut c, &a, 0.0).0, 0);
        // b shares the system prompt's 3 blocks: restored from a's slots, and then held once.
        let (n, restored) = admit(&mut c, &b, 1000.0);
        assert_eq!(n, 3 * BLOCK);
        assert_eq!(
            restored[..n + 1],
            [(0..n).map(|i| i as f32).collect(), vec![-1.0]].concat()
        );
        let s = c.stats();
        assert_eq!((s.tokens, s.entries), (3 * BLOCK + BLOCK + 2 * BLOCK, 3));
        // b again: all of it but its last token (a partial block is never stored; a whole one is).
        let (n, restored) = admit(&mut c, &b, 0.0);
        assert_eq!(n, b.len() - 1);
        assert_eq!(restored[3 * BLOCK], 1000.0 + (3 * BLOCK) as f32);
        // A prompt that leaves a span mid-block reuses its tokens up to there.
        let c2 = [system[..BLOCK + 5].to_vec(), vec![999; 20]].concat();
        assert_eq!(admit(&mut c, &c2, 0.0).0, BLOCK + 5);
        // ... and is stored from the block boundary: the system span is split there.
        let s = c.stats();
        assert_eq!((s.tokens, s.entries), (3 * BLOCK + BLOCK + 2 * BLOCK + BLOCK, 5));
        assert_eq!(admit(&mut c, &[5, 1], 0.0).0, 0);
        let s = c.stats();
        assert_eq!((s.queries, s.hits), (5, 3));
        assert_eq!(s.reused_tokens as usize, 3 * BLOCK + b.len() - 1 + BLOCK + 5);
        assert_eq!(s.queried_tokens as usize, a.len() + 2 * b.len() + c2.len() + 2);
    }

    #[test]
    fn bounded_least_recently_used_leaves_first_never_a_held_path() {
        let mut c = PrefixCache::new(4 * BLOCK);
        let system = toks(1, 2 * BLOCK);
        let a = [system.clone(), toks(100, BLOCK)].concat();
        let b = [system.clone(), toks(200, BLOCK)].concat();
        admit(&mut c, &a, 0.0);
        admit(&mut c, &b, 0.0);
        assert_eq!((c.stats().tokens, c.stats().evictions), (4 * BLOCK, 0));
        // Using a makes b's leaf the least recently used: a third chat evicts it, not the system.
        admit(&mut c, &a, 0.0);
        let d = [system.clone(), toks(300, BLOCK)].concat();
        assert_eq!(admit(&mut c, &d, 0.0).0, 2 * BLOCK);
        let s = c.stats();
        assert_eq!((s.tokens, s.entries, s.evictions), (4 * BLOCK, 3, 1));
        assert_eq!(admit(&mut c, &b, 0.0).0, 2 * BLOCK, "b's own block went");
        // A prompt extending a held leaf: the leaf is its path, so it is never what makes room.
        let mut c = PrefixCache::new(2 * BLOCK);
        admit(&mut c, &toks(1, BLOCK), 0.0);
        let longer = toks(1, 3 * BLOCK);
        assert_eq!(admit(&mut c, &longer, 0.0).0, BLOCK);
        let s = c.stats();
        assert_eq!(
            (s.tokens, s.entries, s.evictions),
            (2 * BLOCK, 2, 0),
            "only what fits is kept"
        );
        // A path held by a prompt in flight is not evicted by another's insert.
        let (_, hold) = c.restore(&longer, &row(3 * BLOCK as i64, |_| 0.0)).unwrap();
        admit(&mut c, &toks(500, 2 * BLOCK), 0.0);
        assert_eq!(c.stats().evictions, 0);
        c.release(hold);
        admit(&mut c, &toks(500, 2 * BLOCK), 0.0);
        let s = c.stats();
        assert_eq!((s.tokens, s.evictions), (2 * BLOCK, 2));
    }
}
