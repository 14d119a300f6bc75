//! `on_both_backends!`: runs each named `async fn(Backends)` as two tests, one on the embedded backends and
//! one on the real servers, so every behaviour is checked on both.

#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::Backends::Embedded).await
                }
            )*
        }
        mod distributed {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::Backends::Distributed).await
                }
            )*
        }
    };
}
