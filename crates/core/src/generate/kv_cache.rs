//! The KV cache a batch's sequences share: `2·layers` tensors `[rows, Hkv, C, D]`, row i for the
//! batch's sequence i. Rows grow as sequences join (doubling, up to the batch's limit), the
//! capacity C as their positions reach it (by an eighth, at least 32 slots, never past what a
//! live sequence can reach), the live part copied; it is freed when the last sequence leaves.
//! Slots of a row past its sequence's position may hold an earlier sequence's keys: the program's
//! mask never reads them (token at position p attends to slots `0..=p`).
use super::decoder::CacheShape;
use anyhow::Result;
use tch::{Device, Tensor};

/// The cache tensors and how much of them is allocated.
#[derive(Default)]
pub struct KvCache {
    tensors: Vec<Tensor>,
    /// Rows allocated (0 while the cache is freed).
    rows: usize,
    /// Slots per row (C).
    capacity: usize,
}

/// The slots to allocate when `need` are needed and `capacity` are: `capacity` while it is
/// enough, else at least an eighth more (and 32 slots more), never past `most` (what the live
/// sequences can reach) unless `need` is, and at least 2 (the programs' smallest context).
pub(crate) fn grown_capacity(capacity: usize, need: usize, most: usize) -> usize {
    if need <= capacity {
        return capacity;
    }
    need.max(capacity + (capacity / 8).max(32))
        .min(most.max(need))
        .max(2)
}

impl KvCache {
    /// Rows and slots per row allocated.
    pub fn allocated(&self) -> (usize, usize) {
        (self.rows, self.capacity)
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Makes room for `rows` rows (at most `limit`) of at least `need` slots (no sequence
    /// needing more than `most`), keeping the first `live` rows' keys and values.
    pub fn reserve(
        &mut self,
        shape: CacheShape,
        (rows, limit): (usize, usize),
        (need, most): (usize, usize),
        live: usize,
    ) -> Result<()> {
        if rows <= self.rows && need <= self.capacity {
            return Ok(());
        }
        let new_rows = if rows > self.rows {
            rows.max(self.rows * 2).min(limit)
        } else {
            self.rows
        };
        let new_capacity = grown_capacity(self.capacity, need, most);
        let m = shape;
        let dims = [new_rows as i64, m.kv_heads, new_capacity as i64, m.head_dim];
        let live = live as i64;
        let mut grown = Vec::with_capacity(2 * m.layers);
        for i in 0..2 * m.layers {
            let t = Tensor::f_zeros(dims, (m.dtype, Device::Cpu))?;
            if let Some(old) = self.tensors.get(i).filter(|_| live > 0) {
                let old = old.f_narrow(0, 0, live)?;
                t.f_narrow(0, 0, live)?
                    .f_narrow(2, 0, self.capacity as i64)?
                    .f_copy_(&old)?;
            }
            grown.push(t);
        }
        self.tensors = grown;
        self.rows = new_rows;
        self.capacity = new_capacity;
        Ok(())
    }

    /// Dense views of rows `first..first + count` of every cache tensor.
    pub fn views(&self, first: usize, count: usize) -> Result<Vec<Tensor>> {
        Ok(self
            .tensors
            .iter()
            .map(|t| t.f_narrow(0, first as i64, count as i64))
            .collect::<std::result::Result<_, _>>()?)
    }

    /// Copies row `from`'s first `used` slots (within the capacity) into row `to`, as a freed
    /// row takes the last row's sequence.
    pub fn move_row(&self, from: usize, to: usize, used: usize) -> Result<()> {
        let used = used.min(self.capacity) as i64;
        for t in &self.tensors {
            let src = t.f_narrow(0, from as i64, 1)?.f_narrow(2, 0, used)?;
            t.f_narrow(0, to as i64, 1)?.f_narrow(2, 0, used)?.f_copy_(&src)?;
        }
        Ok(())
    }

    /// Frees the tensors.
    pub fn release(&mut self) {
        *self = KvCache::default();
    }
}
