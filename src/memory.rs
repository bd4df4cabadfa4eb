//! Live tensor accounting for `torch.memory()` (napi-free): how many JS-visible tensors are
//! alive and how many bytes their elements occupy (a view counts its own elements, not the
//! storage it shares).
use std::sync::atomic::{AtomicI64, Ordering};

static TENSORS: AtomicI64 = AtomicI64::new(0);
static BYTES: AtomicI64 = AtomicI64::new(0);

/// Bytes of a tensor's elements.
pub fn tensor_bytes(t: &tch::Tensor) -> i64 {
    let elem = t.kind().elt_size_in_bytes() as i64;
    t.size().iter().product::<i64>() * elem
}

pub fn track(bytes: i64) {
    TENSORS.fetch_add(1, Ordering::Relaxed);
    BYTES.fetch_add(bytes, Ordering::Relaxed);
}

pub fn untrack(bytes: i64) {
    TENSORS.fetch_sub(1, Ordering::Relaxed);
    BYTES.fetch_sub(bytes, Ordering::Relaxed);
}

/// `(live tensors, bytes)`.
pub fn snapshot() -> (i64, i64) {
    (TENSORS.load(Ordering::Relaxed), BYTES.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_element_bytes() {
        let t = tch::Tensor::zeros([2, 3], (tch::Kind::Float, tch::Device::Cpu));
        assert_eq!(tensor_bytes(&t), 24);
        let (n0, b0) = snapshot();
        track(24);
        assert_eq!(snapshot(), (n0 + 1, b0 + 24));
        untrack(24);
    }
}
