//! Devices: `'cpu'`, `'cuda'`, `'cuda:N'`. A CUDA request where there is no usable GPU fails
//! here, with `DeviceUnavailable`, before libtorch is asked.
use crate::error::bail_code;
use crate::error::Code;
use anyhow::Result;
use tch::Device;

/// Parses a device string without checking that it exists.
pub fn parse_name(name: &str) -> Result<Device> {
    match name {
        "cpu" => Ok(Device::Cpu),
        "cuda" => Ok(Device::Cuda(0)),
        _ => match name.strip_prefix("cuda:").map(str::parse::<usize>) {
            Some(Ok(i)) => Ok(Device::Cuda(i)),
            _ => bail_code!(
                Code::InvalidArg,
                "device: unknown device '{name}'; expected 'cpu', 'cuda' or 'cuda:N'"
            ),
        },
    }
}

/// Checks a device against the number of CUDA devices libtorch sees.
pub fn check_available(device: Device, cuda_devices: usize) -> Result<Device> {
    if let Device::Cuda(i) = device {
        if cuda_devices == 0 {
            bail_code!(
                Code::DeviceUnavailable,
                "device: CUDA is not available (no CUDA device, or libtorch was built without CUDA); use 'cpu'"
            );
        }
        if i >= cuda_devices {
            bail_code!(
                Code::DeviceUnavailable,
                "device: cuda:{i} does not exist; this machine has {cuda_devices} CUDA device(s)"
            );
        }
    }
    Ok(device)
}

/// Parses and checks a device string against the machine.
pub fn parse(name: &str) -> Result<Device> {
    check_available(parse_name(name)?, cuda_device_count())
}

pub fn cuda_device_count() -> usize {
    if tch::Cuda::is_available() {
        tch::Cuda::device_count().max(0) as usize
    } else {
        0
    }
}

/// PyTorch's spelling: `cpu`, `cuda:0`.
pub fn name(device: Device) -> String {
    match device {
        Device::Cpu => "cpu".to_string(),
        Device::Cuda(i) => format!("cuda:{i}"),
        Device::Mps => "mps".to_string(),
        Device::Vulkan => "vulkan".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::describe;

    #[test]
    fn parses_device_names() {
        assert_eq!(parse_name("cpu").unwrap(), Device::Cpu);
        assert_eq!(parse_name("cuda").unwrap(), Device::Cuda(0));
        assert_eq!(parse_name("cuda:3").unwrap(), Device::Cuda(3));
        assert_eq!(name(Device::Cuda(1)), "cuda:1");
    }

    #[test]
    fn rejects_unknown_devices() {
        let (code, msg) = describe(&parse_name("tpu").unwrap_err());
        assert_eq!(code, Code::InvalidArg);
        assert!(msg.contains("unknown device 'tpu'"));
        assert!(parse_name("cuda:x").is_err());
    }

    #[test]
    fn cuda_without_gpus_is_unavailable() {
        let (code, msg) = describe(&check_available(Device::Cuda(0), 0).unwrap_err());
        assert_eq!(code, Code::DeviceUnavailable);
        assert!(msg.contains("CUDA is not available"));
        let (code, msg) = describe(&check_available(Device::Cuda(2), 1).unwrap_err());
        assert_eq!(code, Code::DeviceUnavailable);
        assert!(msg.contains("cuda:2 does not exist"));
        assert_eq!(check_available(Device::Cpu, 0).unwrap(), Device::Cpu);
    }
}
