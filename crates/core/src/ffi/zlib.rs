//! zlib's `compress2` (libz-sys, zlib built from its source), in ffi/ with the other foreign calls
//! (used by the audio module). Whisper's compression ratio must count the bytes Python's `zlib.compress` makes, and
//! the pure-Rust deflaters make others (docs/speech.md).
use anyhow::{bail, Result};

/// `zlib.compress(data, level)`: the zlib stream (header, deflate, Adler-32) of `data`.
pub fn compress(data: &[u8], level: i32) -> Result<Vec<u8>> {
    let Ok(len) = libz_sys::uLong::try_from(data.len()) else {
        bail!("zlib: {} bytes are too many", data.len());
    };
    // SAFETY: compressBound is a pure function of its argument.
    let bound = unsafe { libz_sys::compressBound(len) };
    let mut out = vec![0u8; bound as usize];
    let mut out_len: libz_sys::uLongf = bound;
    // SAFETY: `out` holds `out_len` writable bytes (compressBound's bound, which compress2 never
    // exceeds) and `data` `len` readable ones; both outlive the call, which keeps no pointer.
    let status = unsafe { libz_sys::compress2(out.as_mut_ptr(), &mut out_len, data.as_ptr(), len, level) };
    if status != libz_sys::Z_OK {
        bail!("zlib: compress2 failed ({status})");
    }
    out.truncate(out_len as usize);
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn compress_round_trips_and_sizes_as_python() {
        // Python 3.11, zlib 1.2.13: len(zlib.compress(b" hello" * 8)) == 17, of b"" 8.
        assert_eq!(super::compress(&b" hello".repeat(8), 6).unwrap().len(), 17);
        assert_eq!(super::compress(b"", 6).unwrap().len(), 8);
    }
}
