//! Endgame bitbases: the exact win/draw/loss value, for the side to move, of every position with few
//! pieces, built by our own retrograde generator ([`build`]) on the engine's move generator, stored one
//! file per material slice (`file`) and probed by the search ([`Bitbases::probe`]).
//!
//! - **Value.** The game-theoretic value under the variant's move rules (mandatory and maximum capture,
//!   flying or short kings, promotion, no legal move loses), **ignoring the move-count draw rules** (the
//!   no-progress count and the FMJD endgame counts) and treating endless play as a draw. A bitbase win
//!   can therefore still be a draw over the board when the counts run out first; the search keeps its own
//!   draw-rule checks before it probes.
//! - **Slices.** A slice is one material (white men, white kings, black men, black kings; each side at
//!   least one piece), both sides to move. Index: `side + 2 * (white men + C_wm * (black men + C_bm *
//!   (white kings + C_wk * black kings)))`, each group a colex rank of its squares: men over the squares
//!   off their promotion row, kings over the squares the men leave free (black kings also skip the white
//!   kings). The only waste is the places where a white man and a black man would share a square (an
//!   unused index, stored as [`STORED_INVALID`]).
//! - **Order.** Every capture leads to fewer pieces and every promotion to fewer men, so slices are
//!   solved by piece count, then by number of men, and only quiet moves stay inside the slice.
//!
//! ```
//! use draughts_ai::bitbase::{self, Value};
//! use draughts_engine::{Position, Variant};
//!
//! let tables = bitbase::build(Variant::English, 2, |_| {}).unwrap();
//! // A king against a king: neither side can force anything.
//! let pos = Position::from_fen(Variant::English, "W:WK32:BK1").unwrap();
//! assert_eq!(tables.probe(&pos), Some(Value::Draw));
//! ```

mod build;
pub mod file;
mod index;

use std::path::Path;

use draughts_engine::{Color, Goal, Position, Variant};

pub use build::{SliceReport, build, extend};
pub use file::{BitbaseError, FileError};
pub use index::{Layout, Material, SliceIndex};

/// The value of a position for the side to move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    Win,
    Draw,
    Loss,
}

impl Value {
    /// The value for the other side.
    pub fn flip(self) -> Value {
        match self {
            Value::Win => Value::Loss,
            Value::Draw => Value::Draw,
            Value::Loss => Value::Win,
        }
    }
}

/// Two-bit codes of the stored values.
pub const STORED_DRAW: u8 = 0;
pub const STORED_WIN: u8 = 1;
pub const STORED_LOSS: u8 = 2;
/// An index that names no position (a white and a black man on one square).
pub const STORED_INVALID: u8 = 3;

/// The most pieces a table may hold (material keys use 3 bits per group).
pub const MAX_PIECES: u32 = 7;

/// Whether our generator can build tables for a variant: the diagonal boards of 50 or 32 squares, where
/// the side without a move loses and no king-move limit applies (not Frisian, Turkish, the 12x12 board,
/// antidraughts or breakthrough).
pub fn supports(variant: Variant) -> bool {
    Layout::new(variant).is_some()
}

/// One solved slice: its index and its values, four to a byte.
#[derive(Clone)]
pub struct Slice {
    pub index: SliceIndex,
    pub packed: Vec<u8>,
}

impl Slice {
    #[inline]
    pub fn stored(&self, i: u64) -> u8 {
        (self.packed[(i / 4) as usize] >> ((i % 4) * 2)) & 3
    }
}

/// The tables of one variant: every slice that was built or loaded.
#[derive(Clone)]
pub struct Bitbases {
    layout: Layout,
    /// By [`Material::key`].
    slices: Vec<Option<Slice>>,
    /// Every slice of this many pieces or fewer is present (0: none).
    complete_pieces: u32,
}

// Short Debug forms: a searcher holding tables must not print megabytes of values.
impl std::fmt::Debug for Slice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Slice({}, {} indices)",
            self.index.material(),
            self.index.size()
        )
    }
}

impl std::fmt::Debug for Bitbases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Bitbases({}, {} slices, complete up to {} pieces)",
            self.variant(),
            self.slices().count(),
            self.complete_pieces
        )
    }
}

impl Bitbases {
    /// No tables yet.
    pub fn empty(variant: Variant) -> Result<Bitbases, BitbaseError> {
        let layout = Layout::new(variant).ok_or(BitbaseError::Unsupported(variant))?;
        Ok(Bitbases {
            layout,
            slices: vec![None; Material::KEYS],
            complete_pieces: 0,
        })
    }

    pub fn variant(&self) -> Variant {
        self.layout.variant()
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The largest piece count up to which every slice is present (0: none), so positions with at most
    /// this many pieces are probed.
    pub fn pieces(&self) -> u32 {
        self.complete_pieces
    }

    /// The slices present.
    pub fn slices(&self) -> impl Iterator<Item = &Slice> {
        self.slices.iter().flatten()
    }

    pub fn slice(&self, material: Material) -> Option<&Slice> {
        self.slices[material.key()].as_ref()
    }

    pub(crate) fn insert(&mut self, slice: Slice) {
        let key = slice.index.material().key();
        self.slices[key] = Some(slice);
        self.complete_pieces = (1..=MAX_PIECES)
            .take_while(|&n| Material::all_with(n).all(|m| self.slices[m.key()].is_some()))
            .last()
            .unwrap_or(0);
    }

    /// Loads every table of `variant` found in `dir` (files `VARIANT-WMWKBMBK.bb`). A missing directory
    /// gives no tables; a bad file is an error.
    pub fn load(dir: &Path, variant: Variant) -> Result<Bitbases, BitbaseError> {
        let mut tables = Bitbases::empty(variant)?;
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(tables),
            Err(source) => {
                return Err(BitbaseError::Io {
                    path: dir.to_path_buf(),
                    source,
                });
            }
        };
        let prefix = format!("{}-", variant.key());
        for entry in entries {
            let entry = entry.map_err(|source| BitbaseError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if !(name.starts_with(&prefix) && name.ends_with(".bb")) {
                continue;
            }
            let path = entry.path();
            let bytes = std::fs::read(&path).map_err(|source| BitbaseError::Io {
                path: path.clone(),
                source,
            })?;
            let slice = file::decode(&bytes, &tables.layout)
                .map_err(|error| BitbaseError::File { path, error })?;
            tables.insert(slice);
        }
        Ok(tables)
    }

    /// Writes every slice to `dir` (created if needed), one file each; returns the bytes written.
    pub fn write_dir(&self, dir: &Path) -> Result<u64, BitbaseError> {
        let mut total = 0;
        for slice in self.slices() {
            total += Bitbases::write_slice(dir, self.variant(), slice)?;
        }
        Ok(total)
    }

    /// Writes one slice of `variant`'s tables to its file in `dir` (created if needed); returns the bytes
    /// written. The file appears whole or not at all: it is written under a temporary name and renamed.
    pub fn write_slice(dir: &Path, variant: Variant, slice: &Slice) -> Result<u64, BitbaseError> {
        std::fs::create_dir_all(dir).map_err(|source| BitbaseError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let name = file::file_name(variant, slice.index.material());
        let path = dir.join(&name);
        // A name of this process's own: two processes building the same tables into one directory
        // never write one partial file together (each renames a whole file of the same bytes).
        let partial = dir.join(format!("{name}.{}.partial", std::process::id()));
        let bytes = file::encode(variant, slice);
        std::fs::write(&partial, &bytes).map_err(|source| BitbaseError::Io {
            path: partial.clone(),
            source,
        })?;
        std::fs::rename(&partial, &path).map_err(|source| BitbaseError::Io { path, source })?;
        Ok(bytes.len() as u64)
    }

    /// The value of a position for the side to move, when its slice is present (any position of at most
    /// [`Bitbases::pieces`] pieces, capture pending or not: the tables hold every position). A side without
    /// pieces has lost.
    pub fn probe(&self, pos: &Position) -> Option<Value> {
        if pos.variant() != self.layout.variant() {
            return None;
        }
        let (squares, side) = self.layout.squares_of(pos);
        self.value_of(&squares, side)
    }

    /// The value of a position given as square masks, `side` to move.
    pub(crate) fn value_of(&self, squares: &index::Squares, side: Color) -> Option<Value> {
        let material = squares.material();
        let (own, other) = match side {
            Color::White => (material.white(), material.black()),
            Color::Black => (material.black(), material.white()),
        };
        if own == 0 {
            return Some(Value::Loss);
        }
        if other == 0 {
            return Some(Value::Win);
        }
        if material.total() > MAX_PIECES {
            return None;
        }
        let slice = self.slices[material.key()].as_ref()?;
        let i = slice.index.index(&self.layout, squares, side);
        match slice.stored(i) {
            STORED_WIN => Some(Value::Win),
            STORED_LOSS => Some(Value::Loss),
            _ => Some(Value::Draw),
        }
    }
}

/// The tables of every variant found in one directory, loaded once (a server's or the Hub engine's
/// `--bitbases DIR`): each search takes the tables of its root's variant ([`Shelf::get`]).
#[derive(Clone, Debug, Default)]
pub struct Shelf {
    /// By [`Variant::ALL`] order; only variants with at least one complete piece count.
    tables: Vec<(Variant, std::sync::Arc<Bitbases>)>,
}

impl Shelf {
    /// Loads the tables of every supported variant in `dir`. A variant whose tables cover no complete
    /// piece count is left out; a missing directory or a bad file is an error (a server must not start
    /// believing it has tables it does not).
    pub fn load(dir: &Path) -> Result<Shelf, BitbaseError> {
        std::fs::metadata(dir).map_err(|source| BitbaseError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut tables = Vec::new();
        for variant in Variant::ALL {
            if !supports(variant) {
                continue;
            }
            let t = Bitbases::load(dir, variant)?;
            if t.pieces() > 0 {
                tables.push((variant, std::sync::Arc::new(t)));
            }
        }
        Ok(Shelf { tables })
    }

    /// The tables of `variant`, if any were loaded.
    pub fn get(&self, variant: Variant) -> Option<std::sync::Arc<Bitbases>> {
        self.tables
            .iter()
            .find(|(v, _)| *v == variant)
            .map(|(_, t)| std::sync::Arc::clone(t))
    }

    /// Each variant loaded and the piece count its tables cover.
    pub fn summary(&self) -> Vec<(Variant, u32)> {
        self.tables.iter().map(|(v, t)| (*v, t.pieces())).collect()
    }

    /// Bytes of table data held.
    pub fn bytes(&self) -> usize {
        self.tables
            .iter()
            .flat_map(|(_, t)| t.slices())
            .map(|s| s.packed.len())
            .sum()
    }
}

/// Tables that may arrive while searches run: a server's shelf, replaced when a background build
/// ([`build_missing`]) finishes. Cloning shares it.
#[derive(Clone, Debug, Default)]
pub struct ShelfCell(std::sync::Arc<std::sync::RwLock<Option<std::sync::Arc<Shelf>>>>);

impl ShelfCell {
    /// A cell holding `shelf` (or no tables).
    pub fn new(shelf: Option<Shelf>) -> ShelfCell {
        ShelfCell(std::sync::Arc::new(std::sync::RwLock::new(
            shelf.map(std::sync::Arc::new),
        )))
    }

    /// The tables now (a search keeps the ones it started with).
    pub fn current(&self) -> Option<std::sync::Arc<Shelf>> {
        match self.0.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Makes `shelf` the tables of every search started from now on.
    pub fn replace(&self, shelf: Shelf) {
        let shelf = Some(std::sync::Arc::new(shelf));
        match self.0.write() {
            Ok(mut g) => *g = shelf,
            Err(poisoned) => *poisoned.into_inner() = shelf,
        }
    }
}

/// Which tables a server builds by itself when they are missing: variants and their piece counts,
/// written `international:4,english:4` (`none`: nothing).
///
/// ```
/// use draughts_ai::bitbase::BuildPlan;
/// let plan: BuildPlan = "international:4, english:5".parse().unwrap();
/// assert_eq!(plan.to_string(), "international:4,english:5");
/// assert!("none".parse::<BuildPlan>().unwrap().is_empty());
/// assert!("frisian:4".parse::<BuildPlan>().is_err()); // no tables for orthogonal captures
/// assert!("english:9".parse::<BuildPlan>().is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BuildPlan(pub Vec<(Variant, u32)>);

impl BuildPlan {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::str::FromStr for BuildPlan {
    type Err = String;

    fn from_str(text: &str) -> Result<BuildPlan, String> {
        let text = text.trim();
        if text.is_empty() || text == "none" {
            return Ok(BuildPlan::default());
        }
        let mut plan = Vec::new();
        for item in text.split(',').map(str::trim) {
            let (variant, pieces) = item.split_once(':').ok_or_else(|| {
                format!("{item:?}: expected VARIANT:PIECES, e.g. international:4")
            })?;
            let variant: Variant = variant
                .trim()
                .parse()
                .map_err(|e| format!("{item:?}: {e}"))?;
            if !supports(variant) {
                return Err(BitbaseError::Unsupported(variant).to_string());
            }
            let pieces: u32 = pieces
                .trim()
                .parse()
                .ok()
                .filter(|p| (2..=MAX_PIECES).contains(p))
                .ok_or_else(|| format!("{item:?}: pieces from 2 to {MAX_PIECES}"))?;
            if plan.iter().any(|(v, _)| *v == variant) {
                return Err(format!("{variant} is listed twice"));
            }
            plan.push((variant, pieces));
        }
        Ok(BuildPlan(plan))
    }
}

impl std::fmt::Display for BuildPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        for (i, (variant, pieces)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}:{pieces}", variant.key())?;
        }
        Ok(())
    }
}

/// Solves and writes into `dir` (created if needed) the slices `plan` asks for that `dir` lacks, with
/// `threads` threads, variant by variant; `on_slice` hears of each slice written. Slices already there
/// are kept, so a build stopped part-way (a restart) goes on where it stopped. Returns the slices solved.
pub fn build_missing(
    dir: &Path,
    plan: &BuildPlan,
    threads: usize,
    mut on_slice: impl FnMut(Variant, &SliceReport),
) -> Result<usize, BitbaseError> {
    let mut solved = 0;
    for &(variant, pieces) in &plan.0 {
        let mut tables = Bitbases::load(dir, variant)?;
        extend(&mut tables, pieces, threads, |report, slice| {
            Bitbases::write_slice(dir, variant, slice)?;
            solved += 1;
            on_slice(variant, report);
            Ok(())
        })?;
    }
    Ok(solved)
}

/// Whether `goal` is the usual one (tables assume the side without a move loses).
pub(crate) fn normal_goal(variant: Variant) -> bool {
    variant.rules().goal == Goal::Normal
}
