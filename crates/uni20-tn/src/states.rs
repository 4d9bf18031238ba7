//! Product states ([`Mps::product`]): an MPS of bond dimension 1 in the
//! basis states named by labels, the usual start of a DMRG in a chosen
//! charge sector and of a quench.

use uni20_dispatch::LocalTensor;
use uni20_dist::DistTensor;
use uni20_worker::Controller;

use crate::error::TnError;
use crate::mps::Mps;
use crate::sites::Site;

impl Mps {
    /// The product state `|labels[0]> x |labels[1]> x ...` on `sites`
    /// (site `i` is `M_i[0, s, 0] = 1` for `s` the state named
    /// `labels[i]`), normalised; each distinct site tensor is scattered
    /// once with blocks of `block`.
    ///
    /// # Errors
    /// [`TnError::Shape`] when `labels` and `sites` differ in length;
    /// [`TnError::UnknownState`]; [`TnError::InvalidOption`] for an empty
    /// or too long chain; the errors of [`DistTensor::from_local`].
    pub fn product(ctl: &Controller<'_>, sites: &[Site], labels: &[&str], block: usize) -> Result<Mps, TnError> {
        crate::mpo::check_sites(sites.len())?;
        if labels.len() != sites.len() {
            return Err(TnError::Shape {
                what: "product state labels".into(),
                expected: vec![sites.len()],
                got: vec![labels.len()],
            });
        }
        let mut made: Vec<((usize, usize), DistTensor)> = Vec::new();
        let mut out = Vec::with_capacity(sites.len());
        for (site, label) in sites.iter().zip(labels) {
            let s = site.state(label)?;
            let key = (site.dim(), s);
            if let Some((_, t)) = made.iter().find(|(k, _)| *k == key) {
                out.push(t.clone());
                continue;
            }
            let mut v = vec![0.0; site.dim()];
            v[s] = 1.0;
            let t = DistTensor::from_local(ctl, &LocalTensor::from_f64(&[1, site.dim(), 1], v)?, block)?;
            made.push((key, t.clone()));
            out.push(t);
        }
        Mps::from_sites(out)
    }
}
