use uni20_async::{Async, LocalExecutor};

#[test]
fn read_write_round() {
    let a = Async::new(1).with_name("a");
    let r0 = a.read();
    let w1 = a.write();
    let r1 = a.read();
    let ex = LocalExecutor::new();
    let h1 = ex.spawn(async move { *r1.await.unwrap() });
    let hw = ex.spawn(async move {
        let mut g = w1.await.unwrap();
        *g.value_mut().unwrap() += 10;
    });
    let h0 = ex.spawn(async move { *r0.get().await.unwrap() });
    ex.run().unwrap();
    assert_eq!(h0.try_take().unwrap().unwrap(), 1);
    hw.try_take().unwrap().unwrap();
    assert_eq!(h1.try_take().unwrap().unwrap(), 11);
    assert_eq!(a.get_wait().unwrap(), 11);
}
