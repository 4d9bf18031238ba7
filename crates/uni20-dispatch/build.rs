//! Build script of uni20-dispatch: with the `blas` feature, links the system OpenBLAS. The
//! library is found by pkg-config (`openblas.pc`, shipped by Debian's `libopenblas-dev`);
//! where pkg-config does not know it, a plain `-lopenblas` is emitted and the linker's
//! default search path decides. Without the feature nothing is linked.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CARGO_FEATURE_BLAS");
    #[cfg(feature = "blas")]
    link_openblas();
}

#[cfg(feature = "blas")]
fn link_openblas() {
    match pkg_config::Config::new().atleast_version("0.3").probe("openblas") {
        // pkg-config printed the -L/-l lines.
        Ok(_) => {}
        Err(e) => {
            println!("cargo:warning=uni20-dispatch: pkg-config found no openblas ({e}); trying -lopenblas");
            println!("cargo:rustc-link-lib=dylib=openblas");
        }
    }
}
