//! Arbitrary text as a move: the first byte picks a variant and one of a few positions, the rest is
//! the move text. Resolving never panics; a resolved move is legal and its own text resolves to it.
#![no_main]

use draughts_engine::{MoveText, Position, RuleOptions, RuleSet, Variant};
use libfuzzer_sys::fuzz_target;

/// A few positions per variant: the start, positions with captures, kings and promotions.
fn fens(variant: Variant) -> &'static [&'static str] {
    match variant {
        Variant::International => &[
            "W:W31-50:B1-20",
            "B:W6,9,10,11,20,21,22,23,30,K31,33,37,41,42,43,44,46:BK17,K24",
            "W:W25,27,28,30,32,33,34,35,37,38:B12,13,14,16,18,19,21,23,24,26",
            "W:W6,7,8,9,10:B41,42,43,44,45",
            "W:WK46:B7,9,18,20,29,31,33,40",
        ],
        Variant::English => &[
            "B:W21-32:B1-12",
            "W:WK10,14,22,23:B6,7,18,19,26",
            "B:W5,6,14,15,K30:B9,18,19,K27",
        ],
        Variant::Italian => &[
            "W:W21-32:B1-12",
            "W:W30,26,27,22,23,24,17,18,20:B14,15,16,9,11,5,6,1,3",
            "B:W30,21,22,17,20,K6:B25,28,9,5,1,3",
            "W:WK27,K28,17,20,9,K12,8:B21,24,K19,K13,14,K11,4",
        ],
        Variant::Russian => &[
            "W:W21-32:B1-12",
            "W:WK22:B6,7,14,15,25",
            "W:W9,14,22,27:B5,6,10,18,19,K31",
        ],
        Variant::Brazilian => &[
            "W:W21-32:B1-12",
            "W:WK29,9:B6,7,14,15,18,25",
            "B:W13,14,22,23,K30:B6,9,K19",
        ],
        Variant::Spanish => &[
            "W:W21-32:B1-12",
            "W:WK32,10:B6,14,K15,23,K27",
            "B:W9,13,21,22,K30:B5,17,18,K26",
        ],
        Variant::Czech => &[
            "W:W21-32:B1-12",
            "W:WK29,13,10:B6,9,14,18,22,25",
            "B:W17,18,22,K31:B9,13,14,K2",
        ],
        Variant::Turkish => &[
            "W:Wa2,b2,c2,d2,e2,f2,g2,h2,a3,b3,c3,d3,e3,f3,g3,h3:Ba6,b6,c6,d6,e6,f6,g6,h6,a7,b7,c7,d7,e7,f7,g7,h7",
            "W:WKe5:BKd5,Kc6,Kd7",
            "W:Wd4,e7:Bd5,d7,f7,Kb5",
            "B:WKa1,c3,c5,f4:Bb7,c4,e6,Ke2",
        ],
        Variant::Antidraughts | Variant::Killer => &[
            "W:W31-50:B1-20",
            "B:W6,9,10,11,20,21,22,23,30,K31,33,37,41,42,43,44,46:BK17,K24",
            "W:WK46:B37,K17,23",
        ],
        Variant::Breakthrough => &[
            "W:W31-50:B1-20",
            "W:W25,27,28,30,32,33,34,35,37,38:B12,13,14,16,18,19,21,23,24,26",
            "W:W6,7,8,9,10:B41,42,43,44,45",
        ],
        Variant::Pool => &[
            "B:W21-32:B1-12",
            "B:W26,27,15:B22,10",
            "B:W15,18,K30:BK1,9",
        ],
        Variant::Portuguese => &[
            "W:W21-32:B1-12",
            "W:WK32,10:B6,14,K15,23,K27",
        ],
        Variant::Frisian => &[
            "W:W31-50:B1-20",
            "W:W25,27,28,30,32,33,34,35,37,38:B12,13,14,16,18,19,21,23,24,26",
            "W:WK46,33:B28,K18,8,24:+0+146",
            "W:WK3,35,40:BK48,19,9:+148+33",
        ],
        Variant::Frysk => &[
            "W:W46-50:B1-5",
            "B:WK28,47:B3,K12,22:+212+0",
        ],
        Variant::Canadian => &[
            "W:W43-72:B1-30",
            "W:WK67,50,55:B45,34,49,39",
            "B:W61,62,K70:B55,K6,20",
        ],
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let variant = Variant::ALL[usize::from(selector) % Variant::ALL.len()];
    let list = fens(variant);
    let fen = list[usize::from(selector >> 3) % list.len()];
    // Bit 7 turns on the optional rules the variant accepts.
    let rules = if selector & 0x80 != 0 {
        let mut opts = RuleOptions {
            no_mandatory_capture: !matches!(
                variant.rules().board,
                draughts_engine::BoardKind::Ten | draughts_engine::BoardKind::Twelve
            ),
            promote_mid_capture: true,
            move_limit: std::num::NonZeroU16::new(40),
            ..RuleOptions::default()
        };
        if RuleSet::with_options(variant, opts).is_err() {
            opts.promote_mid_capture = false;
        }
        RuleSet::with_options(variant, opts).expect("valid options")
    } else {
        RuleSet::new(variant)
    };
    let pos = Position::from_fen(rules, fen).expect("fuzz positions are valid");
    if let Ok(parsed) = text.parse::<MoveText>() {
        // The text form of a parsed move text parses again.
        let again: MoveText = parsed
            .to_string()
            .parse()
            .unwrap_or_else(|e| panic!("'{text}' -> '{parsed}' does not parse: {e}"));
        assert_eq!(again.squares, parsed.squares);
    }
    if let Ok(mv) = pos.parse_move(text) {
        assert!(
            pos.is_legal(&mv),
            "{variant} {fen}: '{text}' resolved to an illegal {mv:?}"
        );
        let next = pos.play(&mv).expect("a legal move plays");
        assert_eq!(next.side_to_move(), !pos.side_to_move());
    }
});
