//! The matrix view of a tensor for a decomposition: parsing a label split
//! (`"ab|cd"`, or `"abcd->ac|bd"` to reorder modes), checking it against
//! the tensor's rank ([`SplitError`], in the leaf `error`), and the geometry of the view
//! ([`MatrixSplit`]: which modes form the rows and the columns, in which
//! order, and where each tensor element lands in the row-major matrix).
//! Pure: no controller, no transport.

use std::collections::BTreeSet;

use super::error::SplitError;

/// A checked matrix view of a tensor of rank `rows.len() + cols.len()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MatrixSplit {
    /// Tensor modes forming the rows, slowest-varying first.
    pub(crate) rows: Vec<usize>,
    /// Tensor modes forming the columns, slowest-varying first.
    pub(crate) cols: Vec<usize>,
}

impl MatrixSplit {
    /// Parses `split` against a tensor of rank `rank`.
    ///
    /// Two forms: `"ab|cd"` labels the tensor's modes in order (the first
    /// modes are the rows, the rest the columns); `"abcd->ac|bd"` labels the
    /// modes on the left of `->` and lists any order of them on each side of
    /// `|`. Labels are ASCII letters; spaces are ignored.
    pub(crate) fn parse(split: &str, rank: usize) -> Result<MatrixSplit, SplitError> {
        let text: String = split.chars().filter(|c| !c.is_whitespace()).collect();
        let (labelling, sides) = match text.split_once("->") {
            Some((l, s)) => (Some(l), s),
            None => (None, text.as_str()),
        };
        let syntax = |reason: String| SplitError::Syntax { reason };
        let Some((row_text, col_text)) = sides.split_once('|') else {
            return Err(syntax(format!("no `|` in `{split}`")));
        };
        if col_text.contains('|') {
            return Err(syntax(format!("more than one `|` in `{split}`")));
        }
        let letters = |s: &str| -> Result<Vec<char>, SplitError> {
            match s.chars().find(|c| !c.is_ascii_alphabetic()) {
                Some(c) => Err(syntax(format!("`{c}` is not a label (labels are ASCII letters)"))),
                None => Ok(s.chars().collect()),
            }
        };
        let row_labels = letters(row_text)?;
        let col_labels = letters(col_text)?;
        let modes: Vec<char> = match labelling {
            Some(l) => letters(l)?,
            None => row_labels.iter().chain(&col_labels).copied().collect(),
        };
        let mut seen = BTreeSet::new();
        if let Some(&label) = modes.iter().find(|l| !seen.insert(**l)) {
            return Err(SplitError::Repeated { label });
        }
        if modes.len() != rank {
            return Err(SplitError::RankMismatch {
                labels: modes.len(),
                rank,
            });
        }
        let mut placed = BTreeSet::new();
        if let Some(&label) = row_labels.iter().chain(&col_labels).find(|l| !placed.insert(**l)) {
            return Err(SplitError::Repeated { label });
        }
        let extra: Vec<char> = row_labels
            .iter()
            .chain(&col_labels)
            .copied()
            .filter(|l| !modes.contains(l))
            .collect();
        if !extra.is_empty() {
            return Err(SplitError::Extra { labels: extra });
        }
        let missing: Vec<char> = modes.iter().copied().filter(|l| !placed.contains(l)).collect();
        if !missing.is_empty() {
            return Err(SplitError::Missing { labels: missing });
        }
        if row_labels.is_empty() {
            return Err(SplitError::EmptySide { side: "row" });
        }
        if col_labels.is_empty() {
            return Err(SplitError::EmptySide { side: "column" });
        }
        let position = |l: &char| modes.iter().position(|m| m == l).unwrap_or(0);
        Ok(MatrixSplit {
            rows: row_labels.iter().map(position).collect(),
            cols: col_labels.iter().map(position).collect(),
        })
    }

    /// Extents of the row modes (in row order).
    pub(crate) fn row_dims(&self, shape: &[usize]) -> Vec<usize> {
        self.rows.iter().map(|&k| shape[k]).collect()
    }

    /// Extents of the column modes (in column order).
    pub(crate) fn col_dims(&self, shape: &[usize]) -> Vec<usize> {
        self.cols.iter().map(|&k| shape[k]).collect()
    }

    /// `(rows, cols)` of the matrix view, saturating at `u128::MAX` (an
    /// impossible size is still reported).
    pub(crate) fn matrix_size(&self, shape: &[usize]) -> (u128, u128) {
        let prod = |d: Vec<usize>| d.iter().fold(1u128, |a, &x| a.saturating_mul(x as u128));
        (prod(self.row_dims(shape)), prod(self.col_dims(shape)))
    }

    /// Per tensor mode, its element stride in the row-major `rows x cols`
    /// matrix (the destination strides of a block copied into the matrix).
    pub(crate) fn matrix_strides(&self, shape: &[usize]) -> Vec<usize> {
        let mut strides = vec![0; shape.len()];
        let n: usize = self.col_dims(shape).iter().product();
        let mut s = 1;
        for &k in self.cols.iter().rev() {
            strides[k] = s;
            s *= shape[k];
        }
        let mut s = n;
        for &k in self.rows.iter().rev() {
            strides[k] = s;
            s *= shape[k];
        }
        strides
    }

    /// The multi-index (over the row modes, or over the column modes) of a
    /// flat row or column index of the matrix view.
    pub(crate) fn unflatten(dims: &[usize], mut flat: usize) -> Vec<usize> {
        let mut idx = vec![0; dims.len()];
        for (i, &d) in dims.iter().enumerate().rev() {
            if d > 0 {
                idx[i] = flat % d;
                flat /= d;
            }
        }
        idx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_form_keeps_mode_order() {
        let s = MatrixSplit::parse("ab|cd", 4).unwrap();
        assert_eq!((s.rows, s.cols), (vec![0, 1], vec![2, 3]));
        let s = MatrixSplit::parse(" a | bcd ", 4).unwrap();
        assert_eq!((s.rows, s.cols), (vec![0], vec![1, 2, 3]));
    }

    #[test]
    fn long_form_reorders() {
        let s = MatrixSplit::parse("abcd->db|ac", 4).unwrap();
        assert_eq!((s.rows.clone(), s.cols.clone()), (vec![3, 1], vec![0, 2]));
        // shape (2, 3, 4, 5): rows (d, b) = 5*3, cols (a, c) = 2*4.
        let shape = [2, 3, 4, 5];
        assert_eq!(s.matrix_size(&shape), (15, 8));
        // a (col, slow): 4; c (col, fast): 1; d (row, slow): 3*8; b (row, fast): 8.
        assert_eq!(s.matrix_strides(&shape), vec![4, 8, 1, 24]);
        assert_eq!(MatrixSplit::unflatten(&[5, 3], 7), vec![2, 1]);
    }

    #[test]
    fn bad_splits_are_named() {
        use SplitError::*;
        assert!(matches!(MatrixSplit::parse("abcd", 4), Err(Syntax { .. })));
        assert!(matches!(MatrixSplit::parse("a|b|c", 3), Err(Syntax { .. })));
        assert!(matches!(MatrixSplit::parse("a1|b", 3), Err(Syntax { .. })));
        assert_eq!(MatrixSplit::parse("ab|c", 4), Err(RankMismatch { labels: 3, rank: 4 }));
        assert_eq!(MatrixSplit::parse("ab|bc", 4), Err(Repeated { label: 'b' }));
        assert_eq!(MatrixSplit::parse("abca->ab|c", 4), Err(Repeated { label: 'a' }));
        assert_eq!(MatrixSplit::parse("abcd->ab|b", 4), Err(Repeated { label: 'b' }));
        assert_eq!(MatrixSplit::parse("abcd->ab|c", 4), Err(Missing { labels: vec!['d'] }));
        assert_eq!(MatrixSplit::parse("abcd->ab|cx", 4), Err(Extra { labels: vec!['x'] }));
        assert_eq!(MatrixSplit::parse("|ab", 2), Err(EmptySide { side: "row" }));
        assert_eq!(MatrixSplit::parse("ab->ab|", 2), Err(EmptySide { side: "column" }));
    }
}
