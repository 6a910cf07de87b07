use super::*;

#[test]
fn values_are_the_abis() {
    assert_eq!(Action::Continue as u32, 0);
    assert_eq!(Action::Pause as u32, 1);
    assert_eq!(MapType::RequestHeaders as u32, 0);
    assert_eq!(MapType::ResponseHeaders as u32, 2);
    assert_eq!(MapType::ResponseTrailers as u32, 3);
    assert_eq!(BufferType::HttpResponseBody as u32, 1);
    assert_eq!(MapType::HttpCallResponseHeaders as u32, 6);
    assert_eq!(MapType::HttpCallResponseTrailers as u32, 7);
    assert_eq!(BufferType::HttpCallResponseBody as u32, 4);
    assert_eq!(BufferType::PluginConfiguration as u32, 7);
    assert_eq!(StreamType::Request as u32, 0);
    assert_eq!(MetricType::Gauge as u32, 1);
    assert_eq!(LogLevel::Error as u32, 4);
}

#[test]
fn a_status_logs_as_its_number() {
    assert_eq!(Status::CAS_MISMATCH.to_string(), "8");
    assert_eq!(Status(77).to_string(), "77");
}
