//! The dispatcher records the chosen backend as a `tracing` event.
//!
//! In a test binary of its own: tracing caches per-callsite interest globally,
//! so a scoped subscriber raced with other tests running in parallel.

mod kernels_common;

use std::sync::Arc;

use kernels_common::Declining;
use uni20_dispatch::backends::*;
use uni20_dispatch::*;

/// Captures formatted tracing output.
#[derive(Clone, Default)]
struct Capture(Arc<std::sync::Mutex<Vec<u8>>>);
impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn tracing_records_chosen_backend() {
    let spec = EinsumSpec::parse("ij,jk->ik").unwrap();
    let a = LocalTensor::from_f64(&[2, 3], vec![1., 2., 3., 4., 5., 6.]).unwrap();
    let b = LocalTensor::from_f64(&[3, 2], vec![1., 0., 0., 1., 1., 1.]).unwrap();
    let cap = Capture::default();
    let writer = cap.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let list = BackendList::new(vec![
        Arc::new(Declining {
            name: "picky",
            reason: "nope",
        }),
        Arc::new(FaerBackend::new(1)),
    ]);
    tracing::subscriber::with_default(subscriber, || {
        contract(&spec, C64::new(1., 0.), &a, &b, C64::new(0., 0.), None, &list).unwrap();
    });
    let text = String::from_utf8(cap.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("kernel backend selected"), "{text}");
    assert!(text.contains("backend=faer"), "{text}");
    assert!(!text.contains("backend=picky"), "{text}");
    assert!(text.contains("ij,jk->ik"), "{text}");
}
