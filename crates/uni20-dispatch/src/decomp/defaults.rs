//! The default decomposition backend lists, in one place: `default_cpu` and
//! `default_gpu_first` of [`SvdBackendList`](super::svd::SvdBackendList),
//! [`QrBackendList`](super::qr::QrBackendList) and
//! [`EighBackendList`](super::eigh::EighBackendList). The family files (`svd.rs`, `qr.rs`,
//! `eigh.rs`) name no concrete backend; a new decomposition backend is added to the lists
//! here (as `crate::defaults` does for contraction).

use std::sync::Arc;

use super::eigh::EighBackend;
use super::faer_decomp::FaerDecompBackend;
use super::qr::QrBackend;
use super::svd::SvdBackend;
use super::DecompBackendList;

/// The two default constructors of the list of each family `$Trait`; `$what` names what the
/// CUDA entry declines, for the documentation.
macro_rules! default_lists {
    ($($Trait:ident => $what:literal),* $(,)?) => {$(
        impl DecompBackendList<dyn $Trait> {
            /// `[faer(threads)]`; see [`FaerDecompBackend::new`] for `threads`.
            pub fn default_cpu(threads: usize) -> Self {
                Self::new(vec![Arc::new(FaerDecompBackend::new(threads))])
            }

            #[doc = concat!(
                "With the `cuda` feature `[cuda, faer(threads)]`, where cuda declines every ",
                $what,
                "; without it, the same as [`Self::default_cpu`]."
            )]
            pub fn default_gpu_first(threads: usize) -> Self {
                #[cfg_attr(not(feature = "cuda"), allow(unused_mut))]
                let mut v: Vec<Arc<dyn $Trait>> = vec![Arc::new(FaerDecompBackend::new(threads))];
                #[cfg(feature = "cuda")]
                v.insert(0, Arc::new(super::cuda_decline::CudaDecompBackend));
                Self::new(v)
            }
        }
    )*};
}

default_lists! {
    SvdBackend => "SVD (\"not implemented for svd\")",
    QrBackend => "QR and LQ (\"not implemented for qr\" / \"... lq\")",
    EighBackend => "eigendecomposition (\"not implemented for eigh\")",
}
