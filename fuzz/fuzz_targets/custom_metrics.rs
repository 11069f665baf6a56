#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hpa_fuzz::custom_metrics(data));
