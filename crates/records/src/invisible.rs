//! Characters a terminal (or a person, or a model reading the text) would not show
//! faithfully: the Unicode format characters (General_Category=Cf) and the
//! Default_Ignorable_Code_Point set, plus the line and paragraph separators. They can
//! hide or reorder text (bidi controls, tag characters, variation selectors, Hangul
//! fillers, zero-width characters), so records escape every one of them.
//!
//! Ranges from Unicode 15.1 (`UnicodeData.txt` for Cf, `DerivedCoreProperties.txt`
//! for Default_Ignorable_Code_Point); the unassigned code points that the standard
//! reserves as default-ignorable are included, so characters added later to those
//! blocks are escaped too.

/// Sorted, non-overlapping inclusive ranges.
const INVISIBLE: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),   // soft hyphen (Cf, DI)
    (0x034F, 0x034F),   // combining grapheme joiner (DI)
    (0x0600, 0x0605),   // Arabic number signs (Cf)
    (0x061C, 0x061C),   // Arabic letter mark (Cf, DI)
    (0x06DD, 0x06DD),   // Arabic end of ayah (Cf)
    (0x070F, 0x070F),   // Syriac abbreviation mark (Cf)
    (0x0890, 0x0891),   // Arabic pound/piastre mark above (Cf)
    (0x08E2, 0x08E2),   // Arabic disputed end of ayah (Cf)
    (0x115F, 0x1160),   // Hangul choseong/jungseong fillers (DI)
    (0x17B4, 0x17B5),   // Khmer inherent vowels (DI)
    (0x180B, 0x180F),   // Mongolian variation selectors, vowel separator (Cf, DI)
    (0x200B, 0x200F),   // zero-width space, (non-)joiner, LRM, RLM (Cf, DI)
    (0x2028, 0x202E),   // line/paragraph separators; bidi embeddings, overrides (Cf, DI)
    (0x2060, 0x206F),   // word joiner, invisible operators, bidi isolates (Cf, DI)
    (0x3164, 0x3164),   // Hangul filler (DI)
    (0xFE00, 0xFE0F),   // variation selectors (DI)
    (0xFEFF, 0xFEFF),   // zero-width no-break space, BOM (Cf, DI)
    (0xFFA0, 0xFFA0),   // halfwidth Hangul filler (DI)
    (0xFFF0, 0xFFFB),   // reserved (DI); interlinear annotation (Cf)
    (0x110BD, 0x110BD), // Kaithi number sign (Cf)
    (0x110CD, 0x110CD), // Kaithi number sign above (Cf)
    (0x13430, 0x1343F), // Egyptian hieroglyph format controls (Cf)
    (0x1BCA0, 0x1BCA3), // shorthand format controls (Cf, DI)
    (0x1D173, 0x1D17A), // musical symbol format controls (Cf, DI)
    (0xE0000, 0xE0FFF), // tags, variation selectors supplement, reserved (Cf, DI)
];

/// Whether `c` is a format or default-ignorable character (see the module docs).
pub fn is_invisible(c: char) -> bool {
    let c = u32::from(c);
    let i = INVISIBLE.partition_point(|&(_, hi)| hi < c);
    INVISIBLE.get(i).is_some_and(|&(lo, _)| lo <= c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_disjoint() {
        for w in INVISIBLE.windows(2) {
            assert!(w[0].0 <= w[0].1 && w[0].1 < w[1].0, "{w:x?}");
        }
    }

    #[test]
    fn every_class_is_invisible() {
        let classes: &[(&str, &[char])] = &[
            (
                "tag characters",
                &['\u{E0000}', '\u{E0001}', '\u{E0041}', '\u{E007F}'],
            ),
            (
                "variation selectors",
                &['\u{FE00}', '\u{FE0F}', '\u{E0100}', '\u{E01EF}', '\u{180B}'],
            ),
            (
                "Hangul fillers",
                &['\u{115F}', '\u{1160}', '\u{3164}', '\u{FFA0}'],
            ),
            ("combining grapheme joiner", &['\u{034F}']),
            (
                "zero-width",
                &['\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}'],
            ),
            (
                "bidi controls",
                &[
                    '\u{200E}', '\u{200F}', '\u{061C}', '\u{202A}', '\u{202E}', '\u{2066}',
                    '\u{2069}',
                ],
            ),
            (
                "other format characters",
                &[
                    '\u{00AD}',
                    '\u{0600}',
                    '\u{06DD}',
                    '\u{070F}',
                    '\u{08E2}',
                    '\u{180E}',
                    '\u{2064}',
                    '\u{FFF9}',
                    '\u{110BD}',
                    '\u{13430}',
                    '\u{1BCA0}',
                    '\u{1D173}',
                ],
            ),
            ("separators", &['\u{2028}', '\u{2029}']),
            ("Khmer inherent vowels", &['\u{17B4}', '\u{17B5}']),
        ];
        for (class, chars) in classes {
            for &c in *chars {
                assert!(is_invisible(c), "{class}: U+{:04X}", u32::from(c));
            }
        }
    }

    #[test]
    fn visible_text_is_not() {
        for c in [
            'a',
            ' ',
            '~',
            'é',
            'ß',
            '中',
            '한',
            '\u{1100}',
            '\u{0301}',
            '\u{FE10}',
            '\u{FFFD}',
            '😀',
            '\u{E1000}',
            '\u{0590}',
            '\u{2027}',
            '\u{2030}',
        ] {
            assert!(!is_invisible(c), "U+{:04X}", u32::from(c));
        }
    }
}
