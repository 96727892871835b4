//! The font plot text is drawn with: found once per process (see [`super`]) and registered
//! with plotters under [`FONT`].

use super::FONT;
use plotters::style::{register_font, FontStyle};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Find and register the font once per process; returns its path.
pub fn init_fonts() -> Result<PathBuf, String> {
    static DONE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let path = find_font().ok_or_else(|| {
            "no TrueType font found for plot text: install Debian's fonts-dejavu-core \
             (apt-get install fonts-dejavu-core) or set PMKV_FONT=/path/to/font.ttf"
                .to_string()
        })?;
        register(&path, FontStyle::Normal)?;
        let bold = path.with_file_name(
            path.file_stem().and_then(|s| s.to_str()).map(|s| format!("{s}-Bold.ttf")).unwrap_or_default(),
        );
        if bold.is_file() {
            let _ = register(&bold, FontStyle::Bold);
        }
        Ok(path)
    })
    .clone()
}

fn register(path: &Path, style: FontStyle) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // plotters keeps fonts for the whole process and wants 'static bytes: one leak per
    // process (at most two fonts).
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    register_font(FONT, style, bytes).map_err(|_| format!("{}: not a usable TrueType font", path.display()))
}

fn find_font() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PMKV_FONT").map(PathBuf::from).filter(|p| p.is_file()) {
        return Some(p);
    }
    let known = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf",
        "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    ];
    if let Some(p) = known.iter().map(PathBuf::from).find(|p| p.is_file()) {
        return Some(p);
    }
    let mut found = Vec::new();
    for root in ["/usr/share/fonts", "/usr/local/share/fonts"] {
        walk(Path::new(root), &mut found, 0);
    }
    found.sort();
    let score = |p: &PathBuf| {
        let n = p.file_name().and_then(|s| s.to_str()).unwrap_or("").to_ascii_lowercase();
        (!n.contains("sans"), n.contains("mono") || n.contains("bold") || n.contains("italic") || n.contains("oblique"))
    };
    found.into_iter().min_by_key(score)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 4 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out, depth + 1);
        } else if p.extension().is_some_and(|x| x.eq_ignore_ascii_case("ttf")) {
            out.push(p);
        }
    }
}
