#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hpa_fuzz::external_metrics(data));
