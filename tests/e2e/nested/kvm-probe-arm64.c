/* SPDX-License-Identifier: Apache-2.0 */
/* A harness self-check for run-nested.sh --arch aarch64: opens /dev/kvm, creates a VM
 * and a vCPU with the preferred target, and prints what it got. Cross-built
 * and run dynamically linked through the arm64 loader, it proves the 9p +
 * loader path and L1's KVM independently of cubicle:
 *   aarch64-linux-gnu-gcc -o /tmp/kvm-probe tests/e2e/nested/kvm-probe-arm64.c
 *   tests/e2e/nested/run-nested.sh --arch aarch64 -- /tmp/kvm-probe */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(void)
{
	struct kvm_vcpu_init init;
	int kvm, vm, vcpu, ipa;

	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0) {
		printf("KVM-PROBE open=%s\n", strerror(errno));
		return 1;
	}
	printf("KVM-PROBE api=%d\n", ioctl(kvm, KVM_GET_API_VERSION, 0));
	ipa = ioctl(kvm, KVM_CHECK_EXTENSION, KVM_CAP_ARM_VM_IPA_SIZE);
	printf("KVM-PROBE ipa_bits=%d\n", ipa);
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	printf("KVM-PROBE create_vm=%s\n", vm >= 0 ? "ok" : strerror(errno));
	if (vm < 0)
		return 1;
	vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	printf("KVM-PROBE create_vcpu=%s\n", vcpu >= 0 ? "ok" : strerror(errno));
	if (vcpu < 0)
		return 1;
	memset(&init, 0, sizeof(init));
	if (ioctl(vm, KVM_ARM_PREFERRED_TARGET, &init) < 0) {
		printf("KVM-PROBE preferred_target=%s\n", strerror(errno));
		return 1;
	}
	init.features[0] |= 1u << KVM_ARM_VCPU_PSCI_0_2;
	printf("KVM-PROBE target=%u vcpu_init=%s\n", init.target,
	       ioctl(vcpu, KVM_ARM_VCPU_INIT, &init) == 0 ? "ok" : strerror(errno));
	printf("KVM-PROBE gic_v3=%s\n",
	       ioctl(kvm, KVM_CHECK_EXTENSION, KVM_CAP_DEVICE_CTRL) > 0 ? "device-ctrl" : "no");
	return 0;
}
