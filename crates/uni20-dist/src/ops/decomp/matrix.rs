//! The factorizing worker's data handling: assembling the dense row-major
//! matrix view of the input from its blocks (each block checked for NaN
//! and infinities before it is copied, so the first bad block is named),
//! and cutting a factor matrix back into committed blocks of its tiling.
//! Copies are box copies of raw element bytes ([`copy_box`]) straight into
//! the typed storage of the result: no intermediate buffers.

use uni20_dispatch::{DType, LocalTensor, TensorData, C64};
use uni20_persist::{ObjectId, PValue, PersistentPtr, Store};
use uni20_worker::HandlerError;

use super::command::MatrixDescV1;
use super::split::MatrixSplit;
use crate::layout::{c_strides, copy_box};
use crate::tensor::{Block, TensorMeta};

/// The first non-finite element of the input, in block order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BadElement {
    /// Block number (row-major in the input's tiling).
    pub(crate) block: usize,
    /// The element's multi-index in the whole tensor.
    pub(crate) element: Vec<usize>,
    /// Its value, widened.
    pub(crate) value: C64,
}

/// The raw bytes of typed storage, writable.
pub(crate) fn bytes_mut(data: &mut TensorData) -> &mut [u8] {
    match data {
        TensorData::F32(v) => bytemuck::cast_slice_mut(v),
        TensorData::F64(v) => bytemuck::cast_slice_mut(v),
        TensorData::C32(v) => bytemuck::cast_slice_mut(v),
        TensorData::C64(v) => bytemuck::cast_slice_mut(v),
    }
}

/// Zeroed storage of `len` elements of `dtype`.
pub(crate) fn zeros(dtype: DType, len: usize) -> TensorData {
    match dtype {
        DType::F32 => TensorData::F32(vec![0.0; len]),
        DType::F64 => TensorData::F64(vec![0.0; len]),
        DType::C32 => TensorData::C32(vec![Default::default(); len]),
        DType::C64 => TensorData::C64(vec![Default::default(); len]),
    }
}

/// Flat index and value of the first element with a NaN or infinite part.
fn first_non_finite(t: &LocalTensor) -> Option<(usize, C64)> {
    match t.data() {
        TensorData::F32(v) => v
            .iter()
            .position(|x| !x.is_finite())
            .map(|i| (i, C64::new(v[i].into(), 0.0))),
        TensorData::F64(v) => v.iter().position(|x| !x.is_finite()).map(|i| (i, C64::new(v[i], 0.0))),
        TensorData::C32(v) => v
            .iter()
            .position(|x| !x.is_finite())
            .map(|i| (i, C64::new(v[i].re.into(), v[i].im.into()))),
        TensorData::C64(v) => v.iter().position(|x| !x.is_finite()).map(|i| (i, v[i])),
    }
}

/// Loads input block `b` (object `id`), checks that it has `shape` and
/// `dtype`, and finds its first non-finite element (named in the whole
/// tensor by the block's `offset`).
///
/// # Errors
/// A [`HandlerError`] naming the object if it cannot be loaded or does not
/// have the planned shape and dtype.
pub(crate) fn load_input_block(
    store: &Store,
    id: ObjectId,
    b: usize,
    shape: &[usize],
    offset: &[usize],
    dtype: DType,
) -> Result<Result<PValue<Block>, BadElement>, HandlerError> {
    let blk = store
        .load_wait(PersistentPtr::<Block>::from_id(id))
        .map_err(|e| HandlerError::from(e).with_object(id))?;
    let t = &blk.0;
    if t.shape() != shape || t.dtype() != dtype {
        return Err(HandlerError::msg(format!(
            "block {b} is {} {:?}, the input's tiling says {dtype} {shape:?}",
            t.dtype(),
            t.shape(),
        ))
        .with_object(id));
    }
    if let Some((i, value)) = first_non_finite(t) {
        let local = MatrixSplit::unflatten(shape, i);
        let element = local.iter().zip(offset).map(|(l, o)| l + o).collect();
        return Ok(Err(BadElement {
            block: b,
            element,
            value,
        }));
    }
    Ok(Ok(blk))
}

/// Assembles the `rows x cols` matrix view of the input described by `d`
/// from the blocks in `store` (all of them local or replicated by now).
/// Blocks are checked in block order; the first one holding a NaN or an
/// infinity stops the assembly and is returned as `Ok(Err(..))`.
///
/// # Errors
/// A [`HandlerError`] naming the object if a block cannot be loaded or
/// does not have the planned shape and dtype.
pub(crate) fn assemble(store: &Store, d: &MatrixDescV1) -> Result<Result<LocalTensor, BadElement>, HandlerError> {
    let split = MatrixSplit {
        rows: d.rows.clone(),
        cols: d.cols.clone(),
    };
    let rows: usize = split.row_dims(&d.shape).iter().product();
    let cols: usize = split.col_dims(&d.shape).iter().product();
    let strides = split.matrix_strides(&d.shape);
    let elem = d.dtype.size_bytes();
    let mut data = zeros(d.dtype, rows * cols);
    let dst = bytes_mut(&mut data);
    for (b, r) in d.blocks.iter().enumerate() {
        let multi = d.blocking.multi(b);
        let shape = d.blocking.block_shape(&multi);
        let offset = d.blocking.block_offset(&multi);
        let blk = match load_input_block(store, r.id, b, &shape, &offset, d.dtype)? {
            Ok(blk) => blk,
            Err(bad) => return Ok(Err(bad)),
        };
        let t = &blk.0;
        let base: usize = offset.iter().zip(&strides).map(|(o, s)| o * s).sum();
        copy_box(t.as_bytes(), &c_strides(&shape), 0, dst, &strides, base, &shape, elem);
    }
    Ok(Ok(LocalTensor::from_data(&[rows, cols], data)?))
}

/// Cuts `factor` (any shape with the elements of `meta.shape`, row-major)
/// into the blocks of `meta.blocking` and commits each; returns their ids
/// in block order.
///
/// # Errors
/// A [`HandlerError`] if the element counts or dtypes differ, or a commit
/// fails.
pub(crate) fn commit_blocks(
    store: &Store,
    factor: &LocalTensor,
    meta: &TensorMeta,
) -> Result<Vec<ObjectId>, HandlerError> {
    if factor.len() != meta.len() || factor.dtype() != meta.dtype {
        return Err(HandlerError::msg(format!(
            "factor {} {:?} does not fit its planned shape {} {:?}",
            factor.dtype(),
            factor.shape(),
            meta.dtype,
            meta.shape
        )));
    }
    let src = factor.as_bytes();
    let src_strides = c_strides(&meta.shape);
    let elem = meta.dtype.size_bytes();
    let mut ids = Vec::with_capacity(meta.blocking.num_blocks());
    for b in 0..meta.blocking.num_blocks() {
        let multi = meta.blocking.multi(b);
        let shape = meta.blocking.block_shape(&multi);
        let base: usize = meta
            .blocking
            .block_offset(&multi)
            .iter()
            .zip(&src_strides)
            .map(|(o, s)| o * s)
            .sum();
        let mut data = zeros(meta.dtype, shape.iter().product());
        copy_box(
            src,
            &src_strides,
            base,
            bytes_mut(&mut data),
            &c_strides(&shape),
            0,
            &shape,
            elem,
        );
        let blk = LocalTensor::from_data(&shape, data)?;
        let p = store
            .commit(Block(blk))
            .map_err(|e| HandlerError::from(e).context(format!("committing factor block {b}")))?;
        ids.push(p.id());
    }
    Ok(ids)
}

/// The `k x k` diagonal matrix of `values` in `dtype` (a real dtype:
/// `f32` rounds the values once, anything else keeps `f64`).
pub(crate) fn diagonal(values: &[f64], dtype: DType) -> Result<LocalTensor, HandlerError> {
    let k = values.len();
    let data = match dtype {
        DType::F32 => {
            let mut m = vec![0.0f32; k * k];
            for (i, &s) in values.iter().enumerate() {
                m[i * k + i] = s as f32;
            }
            TensorData::F32(m)
        }
        _ => {
            let mut m = vec![0.0f64; k * k];
            for (i, &s) in values.iter().enumerate() {
                m[i * k + i] = s;
            }
            TensorData::F64(m)
        }
    };
    Ok(LocalTensor::from_data(&[k, k], data)?)
}
