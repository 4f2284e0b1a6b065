//! The four shared GPU resources of the thesis (eq. 3, eq. 5).

use serde::{Deserialize, Serialize};

/// One of the four resources a GPU job uses (thesis Table 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    /// GPU utilisation, percent of the card (nvidia-smi `utilization.gpu`).
    GpuUtil,
    /// GPU memory used, MiB.
    GpuMem,
    /// SM / core activity, percent of the card's SMs.
    Sm,
    /// PCIe throughput, TX + RX, MB/s.
    Pcie,
}

impl Resource {
    /// All four, in the canonical order used by images and CSV columns.
    pub const ALL: [Resource; 4] = [Resource::GpuUtil, Resource::GpuMem, Resource::Sm, Resource::Pcie];

    /// The CSV column name of this resource.
    pub fn column(self) -> &'static str {
        match self {
            Resource::GpuUtil => "gpu_util_pct",
            Resource::GpuMem => "gpu_mem_mib",
            Resource::Sm => "sm_pct",
            Resource::Pcie => "pcie_mbps",
        }
    }
}

/// A demand or capacity vector over the four resources.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Resources {
    /// GPU utilisation, percent (0..=100 for one job alone).
    pub gpu_util_pct: f64,
    /// GPU memory, MiB.
    pub gpu_mem_mib: f64,
    /// SM activity, percent (0..=100).
    pub sm_pct: f64,
    /// PCIe TX+RX throughput, MB/s.
    pub pcie_mbps: f64,
}

impl Resources {
    /// All zero.
    pub const ZERO: Resources = Resources { gpu_util_pct: 0.0, gpu_mem_mib: 0.0, sm_pct: 0.0, pcie_mbps: 0.0 };

    /// Builds a vector from its four components in canonical order.
    pub fn new(gpu_util_pct: f64, gpu_mem_mib: f64, sm_pct: f64, pcie_mbps: f64) -> Self {
        Resources { gpu_util_pct, gpu_mem_mib, sm_pct, pcie_mbps }
    }

    /// The component for `r`.
    pub fn get(&self, r: Resource) -> f64 {
        match r {
            Resource::GpuUtil => self.gpu_util_pct,
            Resource::GpuMem => self.gpu_mem_mib,
            Resource::Sm => self.sm_pct,
            Resource::Pcie => self.pcie_mbps,
        }
    }

    /// Mutable access to the component for `r`.
    pub fn get_mut(&mut self, r: Resource) -> &mut f64 {
        match r {
            Resource::GpuUtil => &mut self.gpu_util_pct,
            Resource::GpuMem => &mut self.gpu_mem_mib,
            Resource::Sm => &mut self.sm_pct,
            Resource::Pcie => &mut self.pcie_mbps,
        }
    }

    /// The components as an array in canonical order.
    pub fn to_array(&self) -> [f64; 4] {
        [self.gpu_util_pct, self.gpu_mem_mib, self.sm_pct, self.pcie_mbps]
    }

    /// Builds from an array in canonical order.
    pub fn from_array(a: [f64; 4]) -> Self {
        Resources::new(a[0], a[1], a[2], a[3])
    }

    /// Component-wise sum.
    pub fn add(&self, o: &Resources) -> Resources {
        Resources::new(
            self.gpu_util_pct + o.gpu_util_pct,
            self.gpu_mem_mib + o.gpu_mem_mib,
            self.sm_pct + o.sm_pct,
            self.pcie_mbps + o.pcie_mbps,
        )
    }

    /// Component-wise difference (may go negative).
    pub fn sub(&self, o: &Resources) -> Resources {
        Resources::new(
            self.gpu_util_pct - o.gpu_util_pct,
            self.gpu_mem_mib - o.gpu_mem_mib,
            self.sm_pct - o.sm_pct,
            self.pcie_mbps - o.pcie_mbps,
        )
    }

    /// Component-wise maximum.
    pub fn max(&self, o: &Resources) -> Resources {
        Resources::new(
            self.gpu_util_pct.max(o.gpu_util_pct),
            self.gpu_mem_mib.max(o.gpu_mem_mib),
            self.sm_pct.max(o.sm_pct),
            self.pcie_mbps.max(o.pcie_mbps),
        )
    }

    /// Multiplies every component by `k`.
    pub fn scale(&self, k: f64) -> Resources {
        Resources::new(self.gpu_util_pct * k, self.gpu_mem_mib * k, self.sm_pct * k, self.pcie_mbps * k)
    }

    /// True when every component is within `cap` (with a tiny tolerance for float noise).
    pub fn fits_within(&self, cap: &Resources) -> bool {
        const EPS: f64 = 1e-9;
        self.gpu_util_pct <= cap.gpu_util_pct + EPS
            && self.gpu_mem_mib <= cap.gpu_mem_mib + EPS
            && self.sm_pct <= cap.sm_pct + EPS
            && self.pcie_mbps <= cap.pcie_mbps + EPS
    }

    /// Each component divided by the capacity's (0 where the capacity is 0).
    pub fn normalised(&self, cap: &Resources) -> [f64; 4] {
        let a = self.to_array();
        let c = cap.to_array();
        std::array::from_fn(|i| if c[i] > 0.0 { a[i] / c[i] } else { 0.0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_sub_round_trip() {
        let a = Resources::new(10.0, 100.0, 20.0, 30.0);
        let b = Resources::new(5.0, 50.0, 1.0, 2.0);
        assert_eq!(a.add(&b).sub(&b), a);
        assert!(b.fits_within(&a));
        assert!(!a.fits_within(&b));
    }

    #[test]
    fn normalised_divides_by_capacity() {
        let cap = Resources::new(100.0, 1000.0, 100.0, 0.0);
        let n = Resources::new(50.0, 250.0, 10.0, 7.0).normalised(&cap);
        assert_eq!(n, [0.5, 0.25, 0.1, 0.0]);
    }
}
