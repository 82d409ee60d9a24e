//! The file format of one slice (all integers little-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `DRTBBASE` |
//! | 8 | 2 | format version, 1 |
//! | 10 | 1 | variant: its PDN GameType number |
//! | 11 | 4 | material: white men, white kings, black men, black kings |
//! | 15 | 8 | number of indices (both sides to move) |
//! | 23 | 8 | FNV-1a 64 hash of the values |
//! | 31 | ceil(indices / 4) | the values, two bits each, four to a byte, lowest bits first: 0 draw, 1 win, 2 loss (for the side to move), 3 no position |
//!
//! Files are named `VARIANT-WMWKBMBK.bb` (`international-0201.bb`). A bad or truncated file is refused
//! with a [`FileError`]; reading never panics.

use std::path::PathBuf;

use draughts_engine::Variant;

use super::index::{Layout, Material, SliceIndex};
use super::{MAX_PIECES, Slice};

pub const MAGIC: [u8; 8] = *b"DRTBBASE";
pub const VERSION: u16 = 1;
const HEADER: usize = 31;

/// Why a slice file can't be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    #[error("not a bitbase file (bad magic)")]
    BadMagic,
    #[error("format version {0}, this build reads version {VERSION}")]
    Version(u16),
    #[error("tables of variant number {found}, wanted {expected}")]
    WrongVariant { expected: Variant, found: u8 },
    #[error(
        "material {0:?} is not a slice (a side without pieces, or more than {MAX_PIECES} pieces)"
    )]
    BadMaterial([u8; 4]),
    #[error("{found} indices, the slice has {expected}")]
    WrongSize { expected: u64, found: u64 },
    #[error("truncated: {expected} bytes expected, {found} found")]
    Truncated { expected: u64, found: u64 },
    #[error("values hash mismatch (corrupt file)")]
    Hash,
}

/// Why tables can't be built, loaded or written.
#[derive(Debug, thiserror::Error)]
pub enum BitbaseError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {error}")]
    File { path: PathBuf, error: FileError },
    #[error(
        "no bitbases for {0}: the generator handles diagonal boards of 32 or 50 squares with the usual goal"
    )]
    Unsupported(Variant),
    #[error("piece count {0} out of range (2 to {MAX_PIECES})")]
    Pieces(u32),
}

/// The file name of a slice.
pub fn file_name(variant: Variant, material: Material) -> String {
    format!("{}-{}.bb", variant.key(), material.digits())
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The bytes of a slice file.
pub fn encode(variant: Variant, slice: &Slice) -> Vec<u8> {
    let m = slice.index.material();
    let mut out = Vec::with_capacity(HEADER + slice.packed.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.push(variant.pdn_game_type());
    out.extend_from_slice(&[m.white_men, m.white_kings, m.black_men, m.black_kings]);
    out.extend_from_slice(&slice.index.size().to_le_bytes());
    out.extend_from_slice(&fnv1a(&slice.packed).to_le_bytes());
    out.extend_from_slice(&slice.packed);
    out
}

fn field<const N: usize>(bytes: &[u8], at: usize) -> Result<[u8; N], FileError> {
    bytes
        .get(at..at + N)
        .and_then(|b| b.try_into().ok())
        .ok_or(FileError::Truncated {
            expected: (at + N) as u64,
            found: bytes.len() as u64,
        })
}

/// Reads a slice file for `layout`'s variant.
pub fn decode(bytes: &[u8], layout: &Layout) -> Result<Slice, FileError> {
    let magic: [u8; 8] = field(bytes, 0)?;
    if magic != MAGIC {
        return Err(FileError::BadMagic);
    }
    let version = u16::from_le_bytes(field(bytes, 8)?);
    if version != VERSION {
        return Err(FileError::Version(version));
    }
    let [variant] = field::<1>(bytes, 10)?;
    if variant != layout.variant().pdn_game_type() {
        return Err(FileError::WrongVariant {
            expected: layout.variant(),
            found: variant,
        });
    }
    let m: [u8; 4] = field(bytes, 11)?;
    let material = Material::new(m[0], m[1], m[2], m[3]);
    if m.iter().any(|&x| x > 7)
        || material.white() == 0
        || material.black() == 0
        || material.total() > MAX_PIECES
    {
        return Err(FileError::BadMaterial(m));
    }
    let index = SliceIndex::new(layout, material);
    let size = u64::from_le_bytes(field(bytes, 15)?);
    if size != index.size() {
        return Err(FileError::WrongSize {
            expected: index.size(),
            found: size,
        });
    }
    let hash = u64::from_le_bytes(field(bytes, 23)?);
    let expected = HEADER as u64 + size.div_ceil(4);
    if bytes.len() as u64 != expected {
        return Err(FileError::Truncated {
            expected,
            found: bytes.len() as u64,
        });
    }
    let packed = bytes[HEADER..].to_vec();
    if fnv1a(&packed) != hash {
        return Err(FileError::Hash);
    }
    Ok(Slice { index, packed })
}
