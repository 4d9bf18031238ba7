//! Resolution of an [`EinsumSpec`] against operand shapes into a [`ResolvedSpec`]: ellipsis
//! expansion with numpy's right-aligned broadcasting, numpy's broadcasting of extent-1 labels,
//! and numpy's implicit output. Everything shape-dependent in numpy's einsum happens here, once;
//! the result has ordinary labels only and is what kernels and command descriptors carry.

use super::parse::Term;
use super::{EinsumSpec, ResolvedSpec, SpecError};

/// Every label a spec may use, in the order fresh labels are handed out.
fn alphabet() -> impl Iterator<Item = char> {
    ('A'..='Z').chain('a'..='z')
}

/// numpy's implicit output labels: those occurring exactly once over all inputs, sorted by
/// code point (so `A-Z` before `a-z`). Ellipsis dimensions (which numpy puts first) are not
/// included.
pub(super) fn implicit_labels(inputs: &[Term]) -> Vec<char> {
    let all: Vec<char> = inputs.iter().flat_map(|t| t.labels.iter().copied()).collect();
    let mut once: Vec<char> = all
        .iter()
        .copied()
        .filter(|l| all.iter().filter(|x| *x == l).count() == 1)
        .collect();
    once.sort_unstable();
    once
}

/// Where an operand's labels and ellipsis sit in its shape.
struct Layout<'s> {
    /// Extents of the dimensions the ellipsis covers (empty without ellipsis).
    ell: &'s [usize],
    /// Extent of each explicit label, in label order.
    labeled: Vec<usize>,
}

fn layout<'s>(operand: usize, t: &Term, shape: &'s [usize]) -> Result<Layout<'s>, SpecError> {
    let n = t.labels.len();
    let (ell, labeled) = match t.ellipsis {
        None if shape.len() != n => {
            return Err(SpecError::RankMismatch {
                operand,
                expected: n,
                got: shape.len(),
            })
        }
        None => (&shape[..0], shape.to_vec()),
        Some(_) if shape.len() < n => {
            return Err(SpecError::RankTooSmall {
                operand,
                min: n,
                got: shape.len(),
            })
        }
        Some(p) => {
            let e = shape.len() - n;
            let labeled = shape[..p].iter().chain(&shape[p + e..]).copied().collect();
            (&shape[p..p + e], labeled)
        }
    };
    Ok(Layout { ell, labeled })
}

/// The common non-1 extent of a group of extents (numpy broadcasting), or 1 if all are 1;
/// `Err((first, second))` for two different non-1 extents.
fn broadcast(target: &mut Option<usize>, d: usize) -> Result<(), (usize, usize)> {
    match *target {
        _ if d == 1 => Ok(()),
        Some(t) if t != d => Err((t, d)),
        Some(_) => Ok(()),
        None => {
            *target = Some(d);
            Ok(())
        }
    }
}

impl EinsumSpec {
    /// Resolves the spec for operands of the given shapes (one shape per input, in order) into
    /// a concrete [`ResolvedSpec`] with numpy's einsum semantics:
    ///
    /// - **Ellipsis.** Each operand's `...` covers its dimensions not named by labels. The
    ///   ellipsis dimensions of all operands are right-aligned and broadcast: extents must be
    ///   equal or 1; the broadcast extent is the non-1 one (1 if all are 1). Each broadcast
    ///   dimension gets a fresh label (unused ASCII letters, `A..Z` then `a..z`). An operand
    ///   whose extent is 1 where the broadcast extent is not gets instead its own fresh label,
    ///   of extent 1, absent from the output: it is summed out, which multiplies by its single
    ///   element exactly as numpy's broadcast does.
    /// - **Broadcast labels.** numpy also broadcasts a labelled dimension of extent 1 against
    ///   the same label with another extent in another operand; such an occurrence is renamed
    ///   to a fresh summed label in the same way.
    /// - **Output.** Explicit: `...` in the output expands to the broadcast dimensions in
    ///   order. Implicit: the broadcast dimensions first, then the labels occurring exactly
    ///   once, sorted by code point.
    ///
    /// Repeated labels within an operand stay (diagonals); their extents must agree.
    ///
    /// ```
    /// use uni20_dispatch::EinsumSpec;
    ///
    /// let spec = EinsumSpec::parse("...ij,...jk")?;
    /// let r = spec.resolve(&[&[5, 1, 2, 3], &[4, 3, 6]])?;
    /// // Ellipsis dims (5, 1) and (4,) broadcast to (5, 4): fresh labels A, B; operand 0's
    /// // extent-1 dim gets its own summed label C.
    /// assert_eq!(r.to_string(), "ACij,Bjk->ABik");
    /// assert_eq!(r.output_shape(&[&[5, 1, 2, 3], &[4, 3, 6]])?, vec![5, 4, 2, 6]);
    /// # Ok::<(), uni20_dispatch::SpecError>(())
    /// ```
    ///
    /// # Errors
    /// [`SpecError::OperandCount`], [`SpecError::RankMismatch`] (operand without ellipsis),
    /// [`SpecError::RankTooSmall`] (operand with ellipsis), [`SpecError::BroadcastMismatch`],
    /// [`SpecError::DiagonalMismatch`], [`SpecError::ExtentMismatch`] (two different extents
    /// other than 1), [`SpecError::MissingOutputEllipsis`] (explicit output without `...`
    /// while ellipses cover dimensions), [`SpecError::TooManyLabels`].
    pub fn resolve(&self, shapes: &[&[usize]]) -> Result<ResolvedSpec, SpecError> {
        if shapes.len() != self.inputs.len() {
            return Err(SpecError::OperandCount {
                expected: self.inputs.len(),
                got: shapes.len(),
            });
        }
        let layouts = self
            .inputs
            .iter()
            .zip(shapes)
            .enumerate()
            .map(|(k, (t, s))| layout(k, t, s))
            .collect::<Result<Vec<_>, _>>()?;

        // Broadcast shape of the ellipsis dimensions, right-aligned.
        let nb = layouts.iter().map(|l| l.ell.len()).max().unwrap_or(0);
        let mut bshape: Vec<Option<usize>> = vec![None; nb];
        for l in &layouts {
            let off = nb - l.ell.len();
            for (i, &d) in l.ell.iter().enumerate() {
                broadcast(&mut bshape[off + i], d).map_err(|(first, second)| SpecError::BroadcastMismatch {
                    axis: off + i,
                    first,
                    second,
                })?;
            }
        }
        let bshape: Vec<usize> = bshape.into_iter().map(|d| d.unwrap_or(1)).collect();

        // Label extents: equal within an operand, equal or 1 across operands.
        let mut own: Vec<Vec<(char, usize)>> = Vec::with_capacity(layouts.len());
        let mut target: Vec<(char, Option<usize>)> = Vec::new();
        for (operand, (t, l)) in self.inputs.iter().zip(&layouts).enumerate() {
            let mut mine: Vec<(char, usize)> = Vec::new();
            for (&label, &d) in t.labels.iter().zip(&l.labeled) {
                match mine.iter().find(|(x, _)| *x == label) {
                    Some(&(_, first)) if first != d => {
                        return Err(SpecError::DiagonalMismatch {
                            operand,
                            label,
                            first,
                            second: d,
                        })
                    }
                    Some(_) => {}
                    None => mine.push((label, d)),
                }
            }
            for &(label, d) in &mine {
                let pos = match target.iter().position(|(x, _)| *x == label) {
                    Some(p) => p,
                    None => {
                        target.push((label, None));
                        target.len() - 1
                    }
                };
                broadcast(&mut target[pos].1, d).map_err(|(first, second)| SpecError::ExtentMismatch {
                    label,
                    first,
                    second,
                })?;
            }
            own.push(mine);
        }
        let broadcast_label =
            |label: char, d: usize| d == 1 && target.iter().any(|&(x, t)| x == label && t.is_some_and(|t| t != 1));

        // Fresh labels: the broadcast dims, then one per summed extent-1 occurrence.
        let used: Vec<char> = alphabet()
            .filter(|c| self.inputs.iter().chain(&self.output).any(|t| t.labels.contains(c)))
            .collect();
        let summed_ell: usize = layouts
            .iter()
            .map(|l| {
                let off = nb - l.ell.len();
                (0..l.ell.len())
                    .filter(|&i| l.ell[i] == 1 && bshape[off + i] != 1)
                    .count()
            })
            .sum();
        let renamed: usize = own
            .iter()
            .map(|m| m.iter().filter(|&&(l, d)| broadcast_label(l, d)).count())
            .sum();
        let needed = used.len() + nb + summed_ell + renamed;
        if needed > 52 {
            return Err(SpecError::TooManyLabels { needed });
        }
        let mut fresh = alphabet().filter(|c| !used.contains(c));
        let mut take = || fresh.next().unwrap_or('?');
        let ell_labels: Vec<char> = (0..nb).map(|_| take()).collect();

        let mut inputs: Vec<Vec<char>> = Vec::with_capacity(layouts.len());
        for ((t, l), mine) in self.inputs.iter().zip(&layouts).zip(&own) {
            let renames: Vec<(char, char)> = mine
                .iter()
                .filter(|&&(x, d)| broadcast_label(x, d))
                .map(|&(x, _)| (x, take()))
                .collect();
            let off = nb - l.ell.len();
            let mut labels = Vec::with_capacity(t.labels.len() + l.ell.len());
            for k in 0..=t.labels.len() {
                if t.ellipsis == Some(k) {
                    for (i, &d) in l.ell.iter().enumerate() {
                        let axis = off + i;
                        labels.push(if d == 1 && bshape[axis] != 1 {
                            take()
                        } else {
                            ell_labels[axis]
                        });
                    }
                }
                if let Some(&x) = t.labels.get(k) {
                    labels.push(renames.iter().find(|(from, _)| *from == x).map_or(x, |&(_, to)| to));
                }
            }
            inputs.push(labels);
        }

        let output: Vec<char> = match &self.output {
            Some(t) => {
                if t.ellipsis.is_none() && nb > 0 {
                    return Err(SpecError::MissingOutputEllipsis { dims: nb });
                }
                let p = t.ellipsis.unwrap_or(t.labels.len());
                t.labels[..p]
                    .iter()
                    .chain(&ell_labels)
                    .chain(&t.labels[p..])
                    .copied()
                    .collect()
            }
            None => ell_labels
                .iter()
                .copied()
                .chain(implicit_labels(&self.inputs))
                .collect(),
        };
        let inputs: Vec<&[char]> = inputs.iter().map(Vec::as_slice).collect();
        ResolvedSpec::new(&inputs, &output)
    }
}
