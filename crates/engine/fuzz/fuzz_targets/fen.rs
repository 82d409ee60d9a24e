//! Arbitrary UTF-8 as a FEN for every variant: never panics; a FEN that parses round-trips through
//! `to_fen`, and a game can be started from it.
#![no_main]

use draughts_engine::{Fen, Game, Position, Variant};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = text.parse::<Fen>();
    for variant in Variant::ALL {
        let Ok(pos) = Position::from_fen(variant, text) else {
            continue;
        };
        let fen = pos.to_fen();
        let back = Position::from_fen(variant, &fen).unwrap_or_else(|e| {
            panic!("{variant}: '{text}' gives '{fen}', which does not parse: {e}")
        });
        assert_eq!(back, pos, "{variant}: '{text}' -> '{fen}'");
        assert_eq!(back.to_fen(), fen, "{variant}: to_fen is not stable");
        let game = Game::from_fen(variant, text).expect("the FEN parsed as a position");
        assert_eq!(*game.position(), pos);
    }
});
