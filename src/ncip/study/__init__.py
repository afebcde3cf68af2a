"""ncip.study"""
