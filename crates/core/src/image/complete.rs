//! Whether an image file's bytes hold the whole image.
//!
//! The `image` crate's JPEG decoder (zune-jpeg) decodes a file that stops early, filling the rest
//! with grey, and its WebP and GIF decoders finish without the last bytes they were promised;
//! PIL refuses all of these (`image file is truncated`), as does torchvision's `decode_jpeg`.
//! A service must not classify half an upload, so `decode` asks here first. The PNG, BMP and
//! TIFF decoders already fail on a short file (measured at a dozen cut points per format
//! against PIL, `__tests__/image.test.js`), so they need no check of their own.
use image::ImageFormat;

/// Why the file is cut short, or None when it is complete (or not ours to judge: a malformed
/// file is left to the decoder, whose message says more).
pub fn truncation(bytes: &[u8], format: ImageFormat) -> Option<&'static str> {
    let complete = match format {
        ImageFormat::Jpeg => jpeg(bytes),
        ImageFormat::WebP => webp(bytes),
        ImageFormat::Gif => gif(bytes),
        _ => End::Complete,
    };
    match complete {
        End::Truncated(why) => Some(why),
        End::Complete => None,
    }
}

/// The format's name for messages.
pub fn name(format: ImageFormat) -> &'static str {
    match format {
        ImageFormat::Jpeg => "JPEG",
        ImageFormat::WebP => "WebP",
        ImageFormat::Gif => "GIF",
        ImageFormat::Png => "PNG",
        ImageFormat::Bmp => "BMP",
        ImageFormat::Tiff => "TIFF",
        _ => "image",
    }
}

enum End {
    Complete,
    Truncated(&'static str),
}

const JPEG_EOI: &str = "it ends before its end-of-image marker";

/// A JPEG is complete when its segments and scans lead to the end-of-image marker (EOI): libjpeg
/// (PIL, torchvision) needs it too. Segments carry their length; a scan's entropy-coded data
/// runs to the next marker that is not a stuffed byte (`FF 00`) or a restart (`FF D0`-`D7`).
fn jpeg(b: &[u8]) -> End {
    let mut i = 2; // after SOI, which the format check found
    loop {
        // Bytes between segments are not allowed, but libjpeg skips them with a warning.
        match b.get(i..).and_then(|rest| rest.iter().position(|&x| x == 0xFF)) {
            Some(k) => i += k,
            None => return End::Truncated(JPEG_EOI),
        }
        while b.get(i) == Some(&0xFF) {
            i += 1; // fill bytes before a marker
        }
        let Some(&marker) = b.get(i) else {
            return End::Truncated(JPEG_EOI);
        };
        i += 1;
        match marker {
            0xD9 => return End::Complete,
            0x01 | 0xD0..=0xD8 => continue, // no length: TEM, RSTn, SOI
            _ => {}
        }
        let Some(len) = b.get(i..i + 2).map(|l| u16::from_be_bytes([l[0], l[1]]) as usize) else {
            return End::Truncated("it ends inside a segment header");
        };
        i += len;
        if i > b.len() {
            return End::Truncated("it ends inside a segment");
        }
        if marker == 0xDA {
            // Start of scan: skip its entropy-coded data.
            loop {
                let Some(k) = b[i..].iter().position(|&x| x == 0xFF) else {
                    return End::Truncated("it ends inside the image data");
                };
                i += k;
                match b.get(i + 1) {
                    None => return End::Truncated("it ends inside the image data"),
                    Some(0x00 | 0xD0..=0xD7) => i += 2,
                    Some(_) => break,
                }
            }
        }
    }
}

/// A WebP is a RIFF file: `RIFF`, the size of what follows (little-endian), `WEBP`, chunks.
/// libwebp (PIL) refuses a file shorter than its RIFF size; image-webp does not always.
fn webp(b: &[u8]) -> End {
    match b
        .get(4..8)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize)
    {
        Some(size) if b.len() < size.saturating_add(8) => {
            End::Truncated("it is shorter than its RIFF header says")
        }
        Some(_) => End::Complete,
        None => End::Truncated("it ends inside its RIFF header"),
    }
}

/// A GIF's first frame (what `decode` reads) is complete when every data sub-block it (and the
/// extensions before it) announces is there. PIL accepts a file that stops right after the
/// last whole sub-block (no block terminator, no trailer) and so do we; the decoder then
/// refuses if pixels are still missing.
fn gif(b: &[u8]) -> End {
    const CUT: End = End::Truncated("it ends inside the first frame");
    let table = |flags: u8| {
        if flags & 0x80 != 0 {
            3 << ((flags & 7) + 1)
        } else {
            0
        }
    };
    let Some(&screen_flags) = b.get(10) else {
        return CUT;
    };
    let mut i = 13 + table(screen_flags);
    // Sub-blocks: a length byte, that many bytes; a length of 0 ends them.
    let sub_blocks = |mut i: usize| -> Option<usize> {
        loop {
            let Some(&n) = b.get(i) else {
                return Some(i); // ends between sub-blocks
            };
            i += 1 + n as usize;
            if n == 0 {
                return Some(i);
            }
            if i > b.len() {
                return None;
            }
        }
    };
    loop {
        match b.get(i) {
            None => return CUT,
            Some(0x21) => match sub_blocks(i + 2) {
                Some(next) => i = next,
                None => return CUT,
            },
            Some(0x2C) => {
                let Some(&flags) = b.get(i + 9) else {
                    return CUT;
                };
                // Descriptor (10 bytes), local color table, LZW minimum code size (1 byte).
                let data = i + 10 + table(flags) + 1;
                if data > b.len() {
                    return CUT;
                }
                return match sub_blocks(data) {
                    Some(_) => End::Complete,
                    None => CUT,
                };
            }
            // The trailer before any frame, or something that is not GIF: the decoder says.
            Some(_) => return End::Complete,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(b: &[u8], n: usize, f: ImageFormat) -> bool {
        truncation(&b[..n], f).is_some()
    }

    #[test]
    fn jpeg_needs_its_end_marker() {
        // SOI, an APP0 segment (length 4: two bytes of payload), SOS (length 2, no payload),
        // entropy data with a stuffed FF 00 and a restart marker, EOI.
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0xAA, 0xBB, 0xFF, 0xDA, 0x00, 0x02, 0x12, 0xFF, 0x00, 0x34,
            0xFF, 0xD0, 0x56, 0xFF, 0xD9,
        ];
        assert!(truncation(&jpeg, ImageFormat::Jpeg).is_none());
        for n in 2..jpeg.len() {
            assert!(cut(&jpeg, n, ImageFormat::Jpeg), "cut at {n}");
        }
        assert_eq!(
            truncation(&jpeg[..7], ImageFormat::Jpeg),
            Some("it ends inside a segment")
        );
        assert_eq!(
            truncation(&jpeg[..16], ImageFormat::Jpeg),
            Some("it ends inside the image data")
        );
        assert_eq!(
            truncation(&jpeg[..20], ImageFormat::Jpeg),
            Some("it ends inside the image data")
        );
        assert_eq!(truncation(&jpeg[..8], ImageFormat::Jpeg), Some(JPEG_EOI));
        // Bytes after EOI (some cameras append data) do not matter.
        let mut trailing = jpeg.to_vec();
        trailing.extend_from_slice(b"trailing");
        assert!(truncation(&trailing, ImageFormat::Jpeg).is_none());
    }

    #[test]
    fn webp_needs_its_riff_size() {
        let mut webp = b"RIFF\x08\x00\x00\x00WEBPVP8 ".to_vec();
        assert!(truncation(&webp, ImageFormat::WebP).is_none());
        assert!(cut(&webp, 15, ImageFormat::WebP));
        assert!(cut(&webp, 6, ImageFormat::WebP));
        webp.push(0);
        assert!(truncation(&webp, ImageFormat::WebP).is_none());
    }

    #[test]
    fn gif_needs_the_sub_blocks_of_its_first_frame() {
        // Header, screen descriptor (no global table), a graphic-control extension, an image
        // descriptor (no local table), LZW code size, one 3-byte sub-block, terminator, trailer.
        let mut gif = b"GIF89a".to_vec();
        gif.extend_from_slice(&[1, 0, 1, 0, 0x00, 0, 0]);
        gif.extend_from_slice(&[0x21, 0xF9, 4, 0, 0, 0, 0, 0]);
        gif.extend_from_slice(&[0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0x00]);
        gif.extend_from_slice(&[2, 3, 0x4C, 0x01, 0x00, 0, 0x3B]);
        assert!(truncation(&gif, ImageFormat::Gif).is_none());
        let n = gif.len();
        // As PIL: no trailer, no terminator is fine; a sub-block cut short is not.
        assert!(!cut(&gif, n - 1, ImageFormat::Gif));
        assert!(!cut(&gif, n - 2, ImageFormat::Gif));
        assert!(cut(&gif, n - 3, ImageFormat::Gif));
        assert!(cut(&gif, 20, ImageFormat::Gif)); // inside the extension
        assert!(cut(&gif, 30, ImageFormat::Gif)); // before the image data
        assert!(cut(&gif, 11, ImageFormat::Gif));
    }

    #[test]
    fn other_formats_are_left_to_their_decoders() {
        assert!(truncation(b"\x89PNG", ImageFormat::Png).is_none());
    }
}
