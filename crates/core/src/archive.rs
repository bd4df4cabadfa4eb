//! Validates a TorchScript archive (`torch.jit.save` output) before libtorch reads it.
//!
//! libtorch trusts the archive's pickle: a storage record shorter than the pickle's element count
//! becomes a storage whose tail is heap memory past the record's buffer, and a storage claiming
//! 2^40 elements lets later reads run off the end. So we read the zip's central directory and the
//! two pickles libtorch unpickles for a module (`data.pkl`, whose tensors live in `data/`, and
//! `constants.pkl`, whose tensors live in `constants/`), and check every storage and tensor view
//! against the records that back them. We mirror libtorch's reader (PyTorchStreamReader over
//! miniz, and its C++ Unpickler) where the two could otherwise see different things.
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::rc::Rc;

use zip::read::ZipFile;
use zip::{CompressionMethod, ZipArchive};

use crate::error::{fail, Code};

/// `return Err(...)` with a ModelLoadError; every message is one line naming the record.
macro_rules! reject {
    ($($arg:tt)*) => { return Err(fail(Code::ModelLoadError, format!($($arg)*))) };
}

/// Limits for validation.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bound on the bytes the tensors declare in total, and on any one record's size.
    pub max_bytes: u64,
    /// Bound on uncompressed/compressed size for a deflated record (zip bombs).
    pub max_ratio: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 16 << 30,
            max_ratio: 1000,
        }
    }
}

/// Deflated records below this size skip the ratio check: a few KiB of repetitive code can
/// legitimately compress very well, and they cannot hurt.
const RATIO_FLOOR: u64 = 1 << 20;
/// Bound on a pickle we read into memory (real ones are KiBs to a few MiBs).
const MAX_PICKLE_BYTES: u64 = 1 << 30;
/// Deeper tuples are kept as opaque values: the checks only need flat ones, and dropping a
/// million-deep tree of `Rc`s would overflow our own stack.
const MAX_TUPLE_DEPTH: u8 = 32;

/// Validates an archive held in memory. Input that is not a zip passes: libtorch rejects it
/// with its own message.
pub fn validate_bytes(bytes: &[u8], limits: &Limits) -> anyhow::Result<()> {
    validate(std::io::Cursor::new(bytes), bytes.len() as u64, limits)
}

/// Validates an archive on disk without reading its tensor data. A path that cannot be opened
/// (or is not a file) passes: libtorch reports that in its own words.
pub fn validate_file(path: &Path, limits: &Limits) -> anyhow::Result<()> {
    let Ok(file) = File::open(path) else { return Ok(()) };
    match file.metadata() {
        Ok(meta) if meta.is_file() => validate(BufReader::new(file), meta.len(), limits),
        _ => Ok(()),
    }
}

/// What we know of a zip entry, keyed by its ASCII-lowercased name: miniz's lookup (flags 0)
/// is case-insensitive, so `data/X` may be served by a record we stored as `data/x`.
struct Entry {
    index: usize,
    size: u64,
}

fn validate<R: Read + Seek>(mut reader: R, file_len: u64, limits: &Limits) -> anyhow::Result<()> {
    let mut magic = [0u8; 4];
    let starts_like_zip = reader.read_exact(&mut magic).is_ok() && magic == *b"PK\x03\x04";
    if let Err(e) = reader.seek(SeekFrom::Start(0)) {
        reject!("cannot read model file: {e}");
    }
    let mut zip = match ZipArchive::new(reader) {
        Ok(zip) => zip,
        Err(e) if starts_like_zip => reject!("not a readable zip archive: {e}"),
        Err(_) => return Ok(()),
    };
    // miniz reads offsets as they are written; the zip crate forgives bytes glued in front.
    if zip.offset() != 0 {
        reject!("the zip archive does not start at the beginning of the file");
    }
    let mut entries: HashMap<String, Entry> = HashMap::new();
    let mut prefix = String::new();
    for index in 0..zip.len() {
        let file = match zip.by_index_raw(index) {
            Ok(file) => file,
            Err(e) => reject!("bad zip entry {index}: {e}"),
        };
        let name = String::from_utf8_lossy(file.name_raw()).into_owned();
        if index == 0 {
            // libtorch takes the folder of the first central-directory entry as the archive name.
            let Some((dir, _)) = name.split_once('/') else {
                reject!("archive record '{name}' is not in a folder");
            };
            prefix = dir.to_string();
        }
        check_entry(&file, &name, file_len, limits)?;
        // Two records libtorch cannot tell apart: we might check one while it loads the other.
        let entry = Entry {
            index,
            size: file.size(),
        };
        if entries.insert(name.to_ascii_lowercase(), entry).is_some() {
            reject!("archive has two records named '{name}'");
        }
    }

    let mut storages = Vec::new();
    for (pickle, tensor_dir) in [("data.pkl", "data"), ("constants.pkl", "constants")] {
        let record = format!("{prefix}/{pickle}");
        // A missing pickle is libtorch's to report; it cannot load tensors from it either way.
        let Some(entry) = entries.get(&record.to_ascii_lowercase()) else {
            continue;
        };
        let bytes = read_entry(&mut zip, &record, entry)?;
        let dir = format!("{prefix}/{tensor_dir}/");
        storages.extend(Unpickler::new(&bytes, &record, &dir).run()?);
    }

    // libtorch reads the record once per persistent id, so shared keys count once per use.
    let mut total: u128 = 0;
    for s in &storages {
        if s.numel == 0 {
            continue; // libtorch does not read the record of an empty storage
        }
        let claimed = u128::from(s.numel) * u128::from(s.elem);
        let Some(entry) = entries.get(&s.record.to_ascii_lowercase()) else {
            reject!("archive record '{}' is missing but the pickle needs it", s.record);
        };
        if u128::from(entry.size) < claimed {
            let (record, size, numel, dtype) = (&s.record, entry.size, s.numel, s.dtype);
            reject!("archive record '{record}' has {size} bytes but the pickle claims {claimed} ({numel} {dtype})");
        }
        total += claimed;
    }
    if total > u128::from(limits.max_bytes) {
        reject!(
            "the archive's tensors declare {total} bytes, over the limit of {}",
            limits.max_bytes
        );
    }
    Ok(())
}

/// Checks one entry's declared sizes against the limits and the file (zip bombs, truncation).
fn check_entry(file: &ZipFile, name: &str, file_len: u64, limits: &Limits) -> anyhow::Result<()> {
    let (size, compressed, max_ratio) = (file.size(), file.compressed_size(), limits.max_ratio);
    if size > limits.max_bytes {
        reject!(
            "archive record '{name}' declares {size} bytes, over the limit of {}",
            limits.max_bytes
        );
    }
    match file.compression() {
        // miniz refuses stored records whose sizes differ; so do we, before trusting `size`.
        CompressionMethod::Stored if compressed != size => {
            reject!("archive record '{name}' is stored with mismatched sizes ({compressed} and {size} bytes)")
        }
        CompressionMethod::Deflated if size > RATIO_FLOOR && size > compressed.saturating_mul(max_ratio) => {
            reject!("archive record '{name}' inflates {compressed} bytes to {size}, more than {max_ratio}x (a zip bomb?)")
        }
        CompressionMethod::Stored | CompressionMethod::Deflated => {}
        // miniz, libtorch's zip reader, knows only these two.
        other => reject!("archive record '{name}' uses compression {other}, which libtorch cannot read"),
    }
    if file
        .data_start()
        .checked_add(compressed)
        .is_none_or(|end| end > file_len)
    {
        reject!("archive record '{name}' runs past the end of the file");
    }
    Ok(())
}

fn read_entry<R: Read + Seek>(zip: &mut ZipArchive<R>, name: &str, entry: &Entry) -> anyhow::Result<Vec<u8>> {
    if entry.size > MAX_PICKLE_BYTES {
        reject!(
            "archive record '{name}' is too large for a pickle ({} bytes)",
            entry.size
        );
    }
    let mut bytes = Vec::with_capacity(entry.size as usize);
    let read = zip
        .by_index(entry.index)
        .map(|f| f.take(entry.size).read_to_end(&mut bytes));
    match read {
        Ok(Ok(n)) if n as u64 == entry.size => Ok(bytes),
        Ok(Ok(_)) => reject!("archive record '{name}' is shorter than its declared size"),
        Ok(Err(e)) => reject!("archive record '{name}' cannot be read: {e}"),
        Err(e) => reject!("archive record '{name}' cannot be read: {e}"),
    }
}

/// c10::ScalarType in enum order (c10/core/ScalarType.h): storage class stem, Python dtype
/// name, element size. Index = the integer libtorch's unpickler turns `torch.XStorage` into.
#[rustfmt::skip]
const SCALAR_TYPES: [(&str, &str, u64); 46] = [
    ("Byte", "uint8", 1), ("Char", "int8", 1), ("Short", "int16", 2), ("Int", "int32", 4),
    ("Long", "int64", 8), ("Half", "float16", 2), ("Float", "float32", 4), ("Double", "float64", 8),
    ("ComplexHalf", "complex32", 4), ("ComplexFloat", "complex64", 8),
    ("ComplexDouble", "complex128", 16), ("Bool", "bool", 1), ("QInt8", "qint8", 1),
    ("QUInt8", "quint8", 1), ("QInt32", "qint32", 4), ("BFloat16", "bfloat16", 2),
    ("QUInt4x2", "quint4x2", 1), ("QUInt2x4", "quint2x4", 1), ("Bits1x8", "bits1x8", 1),
    ("Bits2x4", "bits2x4", 1), ("Bits4x2", "bits4x2", 1), ("Bits8", "bits8", 1),
    ("Bits16", "bits16", 2), ("Float8_e5m2", "float8_e5m2", 1), ("Float8_e4m3fn", "float8_e4m3fn", 1),
    ("Float8_e5m2fnuz", "float8_e5m2fnuz", 1), ("Float8_e4m3fnuz", "float8_e4m3fnuz", 1),
    ("UInt16", "uint16", 2), ("UInt32", "uint32", 4), ("UInt64", "uint64", 8),
    ("UInt1", "uint1", 1), ("UInt2", "uint2", 1), ("UInt3", "uint3", 1), ("UInt4", "uint4", 1),
    ("UInt5", "uint5", 1), ("UInt6", "uint6", 1), ("UInt7", "uint7", 1),
    ("Int1", "int1", 1), ("Int2", "int2", 1), ("Int3", "int3", 1), ("Int4", "int4", 1),
    ("Int5", "int5", 1), ("Int6", "int6", 1), ("Int7", "int7", 1),
    ("Float8_e8m0fnu", "float8_e8m0fnu", 1), ("Float4_e2m1fn_x2", "float4_e2m1fn_x2", 1),
];

/// Dtype name and element size of a persistent id's type: a `torch.XStorage` class, a torch
/// dtype (`torch.float32`, as Python pickles dtypes), or the raw ScalarType integer libtorch
/// would also accept there.
fn element_type(v: &Value) -> Option<(&'static str, u64)> {
    match v {
        Value::Int(i) => SCALAR_TYPES.get(usize::try_from(*i).ok()?).map(|t| (t.1, t.2)),
        Value::Global(g) => {
            let name = g.strip_prefix("torch.")?;
            if name == "UntypedStorage" || name == "storage.UntypedStorage" {
                return Some(("uint8", 1));
            }
            let found = match name.strip_suffix("Storage") {
                Some(stem) => SCALAR_TYPES.iter().find(|t| t.0 == stem),
                None => SCALAR_TYPES.iter().find(|t| t.1 == name),
            };
            found.map(|t| (t.1, t.2))
        }
        _ => None,
    }
}

/// A storage from a persistent id. Tensors rebuilt over it carry the same value: libtorch's
/// rebuild functions use the whole storage of the tensor they are given.
struct Storage {
    record: String,
    dtype: &'static str,
    elem: u64,
    numel: u64,
}

/// The little of a pickle value the checks need; everything else is `Other`.
#[derive(Clone)]
enum Value {
    Int(i64),
    Str(Rc<str>),
    /// `module.name`, from GLOBAL or STACK_GLOBAL.
    Global(Rc<str>),
    /// Items and nesting depth.
    Tuple(Rc<[Value]>, u8),
    Storage(Rc<Storage>),
    Other,
}

fn tuple(items: Vec<Value>) -> Value {
    let depth_of = |v: &Value| if let Value::Tuple(_, d) = v { *d } else { 0 };
    match 1 + items.iter().map(depth_of).max().unwrap_or(0) {
        depth if depth > MAX_TUPLE_DEPTH => Value::Other,
        depth => Value::Tuple(items.into(), depth),
    }
}

/// Walks a protocol-2 pickle (what torch.jit.save and torch.save write; a few later opcodes are
/// accepted too), keeping only stack, marks and memo, and collecting the storages it names.
struct Unpickler<'a> {
    data: &'a [u8],
    pos: usize,
    /// Start of the opcode being run, for messages.
    at: usize,
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: HashMap<u64, Value>,
    record: &'a str,
    tensor_dir: &'a str,
    storages: Vec<Rc<Storage>>,
}

impl<'a> Unpickler<'a> {
    fn new(data: &'a [u8], record: &'a str, tensor_dir: &'a str) -> Self {
        let (pos, at, stack, marks, memo, storages) = (0, 0, vec![], vec![], HashMap::new(), vec![]);
        Unpickler {
            data,
            pos,
            at,
            stack,
            marks,
            memo,
            record,
            tensor_dir,
            storages,
        }
    }

    fn err(&self, what: impl std::fmt::Display) -> anyhow::Error {
        let (record, at) = (self.record, self.at);
        fail(
            Code::ModelLoadError,
            format!("archive record '{record}': {what} (pickle byte {at})"),
        )
    }

    fn take(&mut self, n: u64) -> anyhow::Result<&'a [u8]> {
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .filter(|&e| e <= self.data.len());
        let end = end.ok_or_else(|| self.err("the pickle ends early"))?;
        let bytes = &self.data[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    fn uint(&mut self, n: usize) -> anyhow::Result<u64> {
        let bytes = self.take(n as u64)?;
        Ok(bytes.iter().rev().fold(0u64, |acc, &b| acc << 8 | u64::from(b)))
    }

    fn line(&mut self) -> anyhow::Result<String> {
        let rest = &self.data[self.pos..];
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| self.err("the pickle ends early"))?;
        self.pos += n + 1;
        Ok(String::from_utf8_lossy(&rest[..n]).into_owned())
    }

    /// Pops one value; values below the innermost MARK are out of reach, as in Python.
    fn pop(&mut self) -> anyhow::Result<Value> {
        if self.stack.len() <= self.marks.last().copied().unwrap_or(0) {
            return Err(self.err("stack underflow"));
        }
        Ok(self.stack.pop().expect("checked above"))
    }

    fn pop_mark(&mut self) -> anyhow::Result<Vec<Value>> {
        let mark = self.marks.pop().ok_or_else(|| self.err("no MARK to pop to"))?;
        Ok(self.stack.split_off(mark))
    }

    fn top(&self) -> anyhow::Result<Value> {
        match self.stack.last() {
            Some(v) if self.stack.len() > self.marks.last().copied().unwrap_or(0) => Ok(v.clone()),
            _ => Err(self.err("stack underflow")),
        }
    }

    fn long(&mut self, n: u64) -> anyhow::Result<Value> {
        let bytes = self.take(n)?;
        if bytes.len() > 8 {
            return Ok(Value::Other); // beyond i64: no size or count we accept can be this
        }
        let negative = bytes.last().is_some_and(|&b| b & 0x80 != 0);
        let mut le = [if negative { 0xff } else { 0 }; 8];
        le[..bytes.len()].copy_from_slice(bytes);
        Ok(Value::Int(i64::from_le_bytes(le)))
    }

    // One opcode per line: the dispatch reads as a table.
    #[rustfmt::skip]
    fn run(mut self) -> anyhow::Result<Vec<Rc<Storage>>> {
        loop {
            self.at = self.pos;
            let op = self.take(1)?[0];
            let value = match op {
                b'.' => return Ok(self.storages), // STOP
                0x80 => { self.take(1)?; continue } // PROTO
                0x95 => { self.take(8)?; continue } // FRAME
                b'(' => { self.marks.push(self.stack.len()); continue } // MARK
                b'0' => { self.pop()?; continue } // POP
                b'1' => { self.pop_mark()?; continue } // POP_MARK
                b'2' => self.top()?, // DUP
                b'N' | 0x88 | 0x89 => Value::Other, // NONE, NEWTRUE, NEWFALSE
                b'J' => Value::Int(i64::from(self.uint(4)? as u32 as i32)), // BININT
                b'K' => Value::Int(self.uint(1)? as i64), // BININT1
                b'M' => Value::Int(self.uint(2)? as i64), // BININT2
                0x8a => { let n = self.uint(1)?; self.long(n)? } // LONG1
                0x8b => { let n = self.uint(4)?; self.long(n)? } // LONG4 (a negative length is huge: ends early)
                b'G' => { self.take(8)?; Value::Other } // BINFLOAT
                b'X' | 0x8c | 0x8d => { // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
                    let n = self.uint(match op { b'X' => 4, 0x8c => 1, _ => 8 })?;
                    Value::Str(String::from_utf8_lossy(self.take(n)?).into())
                }
                b'B' | b'C' | 0x8e | b'T' | b'U' => { // BINBYTES, SHORT_BINBYTES, BINBYTES8, BINSTRING, SHORT_BINSTRING
                    let n = self.uint(match op { b'C' | b'U' => 1, 0x8e => 8, _ => 4 })?;
                    self.take(n)?;
                    Value::Other
                }
                b')' => tuple(Vec::new()), // EMPTY_TUPLE
                b't' => { let items = self.pop_mark()?; tuple(items) } // TUPLE
                0x85..=0x87 => { // TUPLE1..3
                    let mut items = (0..op - 0x84).map(|_| self.pop()).collect::<anyhow::Result<Vec<_>>>()?;
                    items.reverse();
                    tuple(items)
                }
                b']' | b'}' | 0x8f => Value::Other, // EMPTY_LIST, EMPTY_DICT, EMPTY_SET
                b'l' | b'd' | 0x91 => { self.pop_mark()?; Value::Other } // LIST, DICT, FROZENSET
                b'a' => { self.pop()?; self.top()?; continue } // APPEND
                b's' => { self.pop()?; self.pop()?; self.top()?; continue } // SETITEM
                b'e' | b'u' | 0x90 => { self.pop_mark()?; self.top()?; continue } // APPENDS, SETITEMS, ADDITEMS
                b'b' => { self.pop()?; self.top()?; continue } // BUILD: the state; the object stays
                b'c' => { let module = self.line()?; let name = self.line()?; Value::Global(format!("{module}.{name}").into()) } // GLOBAL
                0x93 => match (self.pop()?, self.pop()?) { // STACK_GLOBAL
                    (Value::Str(name), Value::Str(module)) => Value::Global(format!("{module}.{name}").into()),
                    _ => return Err(self.err("STACK_GLOBAL needs two strings")),
                },
                b'R' => { let args = self.pop()?; let callable = self.pop()?; self.reduce(&callable, &args)? } // REDUCE
                0x81 => { self.pop()?; self.pop()?; Value::Other } // NEWOBJ
                0x92 => { self.pop()?; self.pop()?; self.pop()?; Value::Other } // NEWOBJ_EX
                b'q' | b'r' | 0x94 => { // BINPUT, LONG_BINPUT, MEMOIZE
                    let key = match op { b'q' => self.uint(1)?, b'r' => self.uint(4)?, _ => self.memo.len() as u64 };
                    let top = self.top()?;
                    self.memo.insert(key, top);
                    continue;
                }
                b'h' | b'j' => { // BINGET, LONG_BINGET
                    let key = self.uint(if op == b'h' { 1 } else { 4 })?;
                    self.memo.get(&key).cloned().ok_or_else(|| self.err(format!("memo entry {key} is unset")))?
                }
                b'Q' => { let pid = self.pop()?; self.persistent_load(&pid)? } // BINPERSID
                // PERSID's id is a string: neither torch.load nor libtorch makes a storage of it.
                b'P' => { self.line()?; Value::Other }
                _ => return Err(self.err(match opcode_name(op) {
                    Some(name) => format!("unsupported pickle opcode {name} (0x{op:02x})"),
                    None => format!("unknown pickle opcode 0x{op:02x}"),
                })),
            };
            self.stack.push(value);
        }
    }

    /// BINPERSID: `('storage', dtype, key, location, numel)`, as libtorch's unpickler reads it.
    fn persistent_load(&mut self, pid: &Value) -> anyhow::Result<Value> {
        let shape_err = || self.err("persistent id is not ('storage', dtype, key, location, numel)");
        let Value::Tuple(items, _) = pid else {
            return Err(shape_err());
        };
        let [Value::Str(tag), dtype, Value::Str(key), _location, numel] = &items[..] else {
            return Err(shape_err());
        };
        if &**tag != "storage" {
            return Err(shape_err());
        }
        let (dtype, elem) = element_type(dtype)
            .ok_or_else(|| self.err(format!("storage '{key}' has an unknown element type")))?;
        let numel = match numel {
            Value::Int(n) => {
                u64::try_from(*n).map_err(|_| self.err(format!("storage '{key}' has {n} elements")))?
            }
            _ => return Err(self.err(format!("storage '{key}' has a non-integer element count"))),
        };
        let storage = Rc::new(Storage {
            record: format!("{}{key}", self.tensor_dir),
            dtype,
            elem,
            numel,
        });
        self.storages.push(storage.clone());
        Ok(Value::Storage(storage))
    }

    fn reduce(&self, callable: &Value, args: &Value) -> anyhow::Result<Value> {
        let (Value::Global(func), Value::Tuple(args, _)) = (callable, args) else {
            return Ok(Value::Other);
        };
        match func.strip_prefix("torch._utils.") {
            Some("_rebuild_tensor" | "_rebuild_tensor_v2" | "_rebuild_tensor_v3" | "_rebuild_qtensor") => {
                self.check_view(func, args)
            }
            // A Parameter wraps the tensor it is given.
            Some("_rebuild_parameter" | "_rebuild_parameter_with_state") => {
                Ok(args.first().cloned().unwrap_or(Value::Other))
            }
            _ => Ok(Value::Other),
        }
    }

    /// `(storage, storage_offset, size, stride, ...)`: the view must stay inside its storage.
    fn check_view(&self, func: &str, args: &[Value]) -> anyhow::Result<Value> {
        let Some(Value::Storage(storage)) = args.first() else {
            return Err(self.err(format!("{func} is not given a storage")));
        };
        let ints = |v: Option<&Value>| -> Option<Vec<i64>> {
            match v {
                Some(Value::Tuple(items, _)) => items
                    .iter()
                    .map(|i| if let Value::Int(n) = i { Some(*n) } else { None })
                    .collect(),
                _ => None,
            }
        };
        let (offset, size, stride) = match (args.get(1), ints(args.get(2)), ints(args.get(3))) {
            (Some(Value::Int(o)), Some(size), Some(stride)) if size.len() == stride.len() => {
                (*o, size, stride)
            }
            _ => return Err(self.err(format!("{func} has a malformed offset, size or stride"))),
        };
        let view = format!("offset {offset}, size {size:?}, stride {stride:?}");
        if offset < 0 || size.iter().chain(&stride).any(|&n| n < 0) {
            return Err(self.err(format!(
                "a tensor over '{}' has a negative extent ({view})",
                storage.record
            )));
        }
        if size.contains(&0) {
            return Ok(args[0].clone()); // no elements, nothing to reach
        }
        // v3 names the view's dtype separately; the others view the storage's own.
        let elem = match func.ends_with("_v3") {
            true => args.get(6).and_then(element_type).map_or(storage.elem, |t| t.1),
            false => storage.elem,
        };
        let last = size
            .iter()
            .zip(&stride)
            .try_fold(offset as u128, |acc, (&n, &s)| {
                acc.checked_add((n as u128 - 1).checked_mul(s as u128)?)
            });
        let needed = last.and_then(|l| l.checked_add(1)?.checked_mul(u128::from(elem)));
        let held = u128::from(storage.numel) * u128::from(storage.elem);
        if needed.is_none_or(|n| n > held) {
            return Err(self.err(format!(
                "a tensor ({view}) reaches past the end of archive record '{}', which holds {} {}",
                storage.record, storage.numel, storage.dtype
            )));
        }
        Ok(args[0].clone())
    }
}

/// Names for the pickle opcodes we do not run, for the error message.
#[rustfmt::skip]
fn opcode_name(op: u8) -> Option<&'static str> {
    Some(match op {
        b'I' => "INT", b'L' => "LONG", b'F' => "FLOAT", b'S' => "STRING", b'V' => "UNICODE",
        b'i' => "INST", b'o' => "OBJ", b'p' => "PUT", b'g' => "GET",
        0x82 => "EXT1", 0x83 => "EXT2", 0x84 => "EXT4", 0x96 => "BYTEARRAY8",
        0x97 => "NEXT_BUFFER", 0x98 => "READONLY_BUFFER",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};
    use zip::write::FileOptions;

    const MLP: &str = "models/fixtures/mlp_traced.pt";

    fn read_fixture(rel: &str) -> Vec<u8> {
        std::fs::read(Path::new(crate::REPO_ROOT).join(rel)).unwrap()
    }

    /// The records of an archive, in order.
    fn records(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
        let mut zip = ZipArchive::new(Cursor::new(bytes)).unwrap();
        (0..zip.len())
            .map(|i| {
                let mut f = zip.by_index(i).unwrap();
                let mut data = Vec::new();
                f.read_to_end(&mut data).unwrap();
                (f.name().to_string(), data)
            })
            .collect()
    }

    /// Writes records into a new zip, deflating those whose name ends in `deflate`.
    fn build(records: &[(String, Vec<u8>)], deflate: &str) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for (name, data) in records {
            let method = match name.ends_with(deflate) {
                true => CompressionMethod::Deflated,
                false => CompressionMethod::Stored,
            };
            zip.start_file(name, FileOptions::default().compression_method(method))
                .unwrap();
            zip.write_all(data).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    /// mlp_traced.pt with `edit` applied to its records.
    fn mlp_with(edit: impl FnOnce(&mut Vec<(String, Vec<u8>)>)) -> Vec<u8> {
        let mut recs = records(&read_fixture(MLP));
        edit(&mut recs);
        build(&recs, "\0")
    }

    fn record<'r>(recs: &'r mut [(String, Vec<u8>)], name: &str) -> &'r mut Vec<u8> {
        &mut recs.iter_mut().find(|(n, _)| n == name).unwrap().1
    }

    /// Replaces the one occurrence of `from` in `data` with `to`.
    fn patch(data: &mut Vec<u8>, from: &[u8], to: &[u8]) {
        let hits: Vec<usize> = (0..data.len()).filter(|&i| data[i..].starts_with(from)).collect();
        assert_eq!(hits.len(), 1, "pattern {from:?} must occur once");
        data.splice(hits[0]..hits[0] + from.len(), to.iter().copied());
    }

    /// The error for the MLP fixture with `from` replaced by `to` in its pickle.
    fn pickle_patched(from: &[u8], to: &[u8]) -> String {
        let bytes = mlp_with(|r| patch(record(r, "mlp_traced/data.pkl"), from, to));
        error(&bytes, &Limits::default())
    }

    fn error(bytes: &[u8], limits: &Limits) -> String {
        let err = validate_bytes(bytes, limits).unwrap_err();
        let (code, message) = crate::error::describe(&err);
        assert_eq!(code, Code::ModelLoadError);
        assert!(!message.contains('\n'));
        message
    }

    #[test]
    fn all_shipped_models_validate() {
        let root = Path::new(crate::REPO_ROOT);
        for dir in ["models", "models/fixtures"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "pt") {
                    let start = std::time::Instant::now();
                    validate_file(&path, &Limits::default()).unwrap();
                    eprintln!("{}: {:?}", path.display(), start.elapsed());
                    validate_bytes(&std::fs::read(&path).unwrap(), &Limits::default()).unwrap();
                }
            }
        }
        // Rewritten by the zip crate (no alignment padding) it is still fine.
        validate_bytes(&mlp_with(|_| {}), &Limits::default()).unwrap();
    }

    #[test]
    fn non_zip_input_is_left_to_libtorch() {
        validate_bytes(b"not a model at all", &Limits::default()).unwrap();
        validate_bytes(b"", &Limits::default()).unwrap();
        validate_file(Path::new("/nonexistent/model.pt"), &Limits::default()).unwrap();
        let msg = error(b"PK\x03\x04 but then garbage", &Limits::default());
        assert!(msg.starts_with("not a readable zip archive"), "{msg}");
    }

    #[test]
    fn short_storage_record_is_rejected() {
        let bytes = mlp_with(|r| record(r, "mlp_traced/data/3").truncate(4));
        let msg = error(&bytes, &Limits::default());
        assert_eq!(
            msg,
            "archive record 'mlp_traced/data/3' has 4 bytes but the pickle claims 12 (3 float32)"
        );
    }

    #[test]
    fn missing_storage_record_is_rejected() {
        let bytes = mlp_with(|r| r.retain(|(n, _)| n != "mlp_traced/data/1"));
        let msg = error(&bytes, &Limits::default());
        assert_eq!(
            msg,
            "archive record 'mlp_traced/data/1' is missing but the pickle needs it"
        );
    }

    #[test]
    fn inflated_element_count_is_rejected() {
        // The last bias: ('storage', FloatStorage, '3', 'cpu', 3) -> numel 2^40 via LONG1 (8 bytes:
        // libtorch's unpickler takes no other length). Loaded, it reads 4 TiB past a 12-byte buffer.
        let msg = pickle_patched(b"h\x09K\x03t", b"h\x09\x8a\x08\0\0\0\0\0\x01\0\0t");
        assert_eq!(
            msg,
            "archive record 'mlp_traced/data/3' has 12 bytes but the pickle claims 4398046511104 (1099511627776 float32)"
        );
    }

    #[test]
    fn views_beyond_their_storage_are_rejected() {
        // The last bias views 3 floats at offset 0; at offset 1 it reaches one past the end.
        let msg = pickle_patched(b"Q\x71\x19K\x00", b"Q\x71\x19K\x01");
        assert!(msg.starts_with("archive record 'mlp_traced/data.pkl': a tensor (offset 1, size [3], stride [1]) reaches past the end of archive record 'mlp_traced/data/3', which holds 3 float32"), "{msg}");
        // The same bias with stride -1.
        let msg = pickle_patched(b"(K\x03t(K\x01t", b"(K\x03t(J\xff\xff\xff\xfft");
        assert!(
            msg.contains("has a negative extent (offset 0, size [3], stride [-1])"),
            "{msg}"
        );
        // The first weight (8x4, stride (4,1)) with stride (5,1) needs 7*5+3+1 = 39 of 32 floats.
        let bytes = mlp_with(|r| patch(record(r, "mlp_traced/data.pkl"), b"(K\x04K\x01t", b"(K\x05K\x01t"));
        assert!(error(&bytes, &Limits::default()).contains("size [8, 4], stride [5, 1]"));
    }

    #[test]
    fn zip_bombs_and_totals_are_bounded() {
        let zeros = vec![0u8; 20 << 20];
        let mut recs = records(&read_fixture(MLP));
        recs.push(("mlp_traced/extra/bomb".into(), zeros));
        let bytes = build(&recs, "bomb");
        // Deflate tops out near 1030x, which zeros reach.
        let msg = error(&bytes, &Limits::default());
        assert!(
            msg.starts_with("archive record 'mlp_traced/extra/bomb' inflates "),
            "{msg}"
        );
        assert!(
            msg.ends_with("to 20971520, more than 1000x (a zip bomb?)"),
            "{msg}"
        );
        validate_bytes(
            &bytes,
            &Limits {
                max_ratio: 2000,
                ..Limits::default()
            },
        )
        .unwrap();
        let limits = Limits {
            max_bytes: 1 << 20,
            ..Limits::default()
        };
        let msg = error(&bytes, &limits);
        assert_eq!(
            msg,
            "archive record 'mlp_traced/extra/bomb' declares 20971520 bytes, over the limit of 1048576"
        );
        // The 128-byte storage '0' loaded 20 times (libtorch reads it once per use): every record
        // is under the limit, the total is not.
        let load = b"(X\x07\0\0\0storagectorch\nFloatStorage\nX\x01\0\0\x000X\x03\0\0\0cpuK\x20tQ0";
        let pickle = [&b"\x80\x02"[..], &load.repeat(20), b"N."].concat();
        let bytes = mlp_with(|r| *record(r, "mlp_traced/data.pkl") = pickle);
        let msg = error(
            &bytes,
            &Limits {
                max_bytes: 2000,
                ..Limits::default()
            },
        );
        assert_eq!(
            msg,
            "the archive's tensors declare 2560 bytes, over the limit of 2000"
        );
    }

    #[test]
    fn malformed_pickles_and_names_are_rejected() {
        let with_pickle = |pickle: &[u8]| mlp_with(|r| *record(r, "mlp_traced/data.pkl") = pickle.to_vec());
        let msg = error(&with_pickle(b"\x80\x02I1\n."), &Limits::default());
        assert_eq!(
            msg,
            "archive record 'mlp_traced/data.pkl': unsupported pickle opcode INT (0x49) (pickle byte 2)"
        );
        let msg = error(&with_pickle(b"\x80\x02\xff."), &Limits::default());
        assert!(msg.contains("unknown pickle opcode 0xff"), "{msg}");
        let msg = error(&with_pickle(b"\x80\x02X\xff\xff\xff\x00ab"), &Limits::default());
        assert!(msg.contains("the pickle ends early"), "{msg}");
        let msg = error(&with_pickle(b"\x80\x02t."), &Limits::default());
        assert!(msg.contains("no MARK"), "{msg}");
        let msg = error(&with_pickle(b"\x80\x02(X\x03\0\0\0abcQ."), &Limits::default());
        assert!(msg.contains("persistent id is not"), "{msg}");
        // A million nested tuples: no stack overflow, and the unfinished pickle is an error.
        let mut deep = b"\x80\x02)".to_vec();
        deep.extend(std::iter::repeat_n(0x85, 1_000_000));
        assert!(error(&with_pickle(&deep), &Limits::default()).contains("ends early"));
        // Names that differ only in case are one record to libtorch.
        let bytes = mlp_with(|r| {
            let copy = ("MLP_traced/data/3".to_string(), vec![0u8; 4]);
            r.push(copy);
        });
        assert_eq!(
            error(&bytes, &Limits::default()),
            "archive has two records named 'MLP_traced/data/3'"
        );
    }
}
